import Lifecycle
import Observability
import Synchronization
import Testing

@testable import Runtime

/// The one lifecycle every long-running part has (runtime, receiver, metrics port, chores), in milliseconds.
@Suite("Service groups: start in order, stop in reverse, one failure stops all")
struct ServiceGroupTests {
    final class Journal: Sendable {
        let lines = Mutex<[String]>([])
        func note(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    /// Runs until its graceful shutdown, then takes `stopping` to finish (a drain), noting both.
    struct Recorder: Service {
        let name: String
        let journal: Journal
        var stopping: Duration = .zero
        /// Fails once this other service has started: a failure while the group still launches its services is
        /// `stoppedWhileMaking`'s case, and a timer would make it this test's too on a starved machine.
        var failOnceStarted: String?

        func run() async throws {
            journal.note("start \(name)")
            if let failOnceStarted {
                while !journal.all.contains("start \(failOnceStarted)") { try await Task.sleep(for: .milliseconds(1)) }
                throw Failure(name: name)
            }
            await GracefulShutdown.current.wait()
            try? await Task.sleep(for: stopping)
            journal.note("stopped \(name)")
        }
    }

    struct Failure: Error, Equatable { let name: String }

    static let logger = Logger(label: "test")

    @Test("a shutdown stops the last started first, and each stop is awaited before the next begins")
    func reverseOrder() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .init("runtime", Recorder(name: "runtime", journal: journal, stopping: .milliseconds(50))),
                .init("receiver", Recorder(name: "receiver", journal: journal)),
            ], logger: Self.logger)
        async let ran: Void = group.run()
        while journal.all.count < 3 { try await Task.sleep(for: .milliseconds(5)) }
        group.shutdown()
        try await ran
        // The runtime's 50 ms drain is awaited: the metrics port stops after it, not beside it.
        #expect(journal.all.suffix(3) == ["stopped receiver", "stopped runtime", "stopped metrics"])
    }

    @Test("a shutdown notice started last is told first: readiness says stopping while the receiver still answers")
    func noticeBeforePortsClose() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .init("receiver", Recorder(name: "receiver", journal: journal, stopping: .milliseconds(30))),
                .init("readiness", ShutdownNotice { journal.note("unready") }),
            ], logger: Self.logger)
        async let ran: Void = group.run()
        while journal.all.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(20))
        #expect(!journal.all.contains("unready"), "told only once the shutdown begins")
        group.shutdown()
        try await ran
        #expect(journal.all.suffix(3) == ["unready", "stopped receiver", "stopped metrics"])
    }

    @Test("a service that fails stops the others in reverse order, and its error is what the group throws")
    func failureStopsAll() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .init("runtime", Recorder(name: "runtime", journal: journal, failOnceStarted: "receiver")),
                .init("receiver", Recorder(name: "receiver", journal: journal)),
            ], logger: Self.logger)
        await #expect(throws: Failure(name: "runtime")) { try await group.run() }
        #expect(journal.all.filter { $0.hasPrefix("stopped") } == ["stopped receiver", "stopped metrics"])
    }

    @Test(
        "services made later (a worker once its ledger opened) start in its place, after the port; all stop in reverse"
    )
    func madeLater() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .later("worker") {
                    journal.note("made worker")
                    return [
                        .init("chore", Recorder(name: "chore", journal: journal)),
                        .init("runtime", Recorder(name: "runtime", journal: journal, stopping: .milliseconds(30))),
                    ]
                },
                .init("receiver", Recorder(name: "receiver", journal: journal)),
            ], logger: Self.logger)
        async let ran: Void = group.run()
        while journal.all.filter({ $0.hasPrefix("start") }).count < 4 { try await Task.sleep(for: .milliseconds(5)) }
        // What the group orders is the launch: the receiver's task is added once the worker is made. Which child
        // task first gets a core is the scheduler's, so the starts themselves are not compared with each other.
        let made = journal.all.firstIndex(of: "made worker")!
        for name in ["chore", "runtime", "receiver"] {
            #expect(made < journal.all.firstIndex(of: "start \(name)")!, "\(name) launched once the worker is made")
        }
        group.shutdown()
        try await ran
        #expect(
            journal.all.filter { $0.hasPrefix("stopped") }
                == ["stopped receiver", "stopped runtime", "stopped chore", "stopped metrics"])
    }

    @Test("a stop while services are being made ends the wait: nothing after starts, what started stops")
    func stoppedWhileMaking() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .later("worker") {
                    journal.note("opening the ledger")
                    await GracefulShutdown.current.wait()  // a ledger that does not answer, until the stop
                    return [.init("runtime", Recorder(name: "runtime", journal: journal))]
                },
                .init("receiver", Recorder(name: "receiver", journal: journal)),
            ], logger: Self.logger)
        async let ran: Void = group.run()
        while !journal.all.contains("opening the ledger") { try await Task.sleep(for: .milliseconds(5)) }
        group.shutdown()
        try await ran
        #expect(journal.all.filter { $0 != "opening the ledger" } == ["start metrics", "stopped metrics"])
    }

    /// The await points of a making: each passes at once but `held`, which waits, whatever the stop or the task's
    /// cancellation says (a ledger open that looks at neither), until the test lets it go on.
    final class Steps: Sendable {
        private struct State {
            var atHeld = false
            var released = false
            var held: CheckedContinuation<Void, Never>?
            var watcher: CheckedContinuation<Void, Never>?
        }
        let held: Int
        private let state = Mutex(State())

        init(holding held: Int) { self.held = held }

        func arrive(_ step: Int) async {
            guard step == held else {
                await Task.yield()
                return
            }
            await withCheckedContinuation { continuation in
                let (goOn, watcher) = state.withLock { state in
                    state.atHeld = true
                    defer { state.watcher = nil }
                    if state.released { return (true, state.watcher) }
                    state.held = continuation
                    return (false, state.watcher)
                }
                watcher?.resume()
                if goOn { continuation.resume() }
            }
        }

        /// Returns once the making waits at the held step.
        func reached() async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state in
                    if state.atHeld { return true }
                    state.watcher = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        func release() {
            let held = state.withLock { state in
                state.released = true
                defer { state.held = nil }
                return state.held
            }
            held?.resume()
        }
    }

    @Test(
        "a stop at any await point of a making, even one that ignores it and returns its services, starts none of them nor anything after",
        arguments: 1...3)
    func stoppedAtEveryAwaitPoint(step: Int) async throws {
        // Each point many times: when the making returns in the instant the stop comes, either may be seen first.
        for _ in 0..<25 {
            let journal = Journal()
            let steps = Steps(holding: step)
            let group = ServiceGroup(
                [
                    .init("metrics", Recorder(name: "metrics", journal: journal)),
                    .later("worker") {
                        for point in 1...3 { await steps.arrive(point) }
                        return [
                            .init("runtime", Recorder(name: "runtime", journal: journal)),
                            .later("receiver") { [.init("receiver", Recorder(name: "receiver", journal: journal))] },
                        ]
                    },
                    .init("chore", Recorder(name: "chore", journal: journal)),
                ], logger: Self.logger)
            async let ran: Void = group.run()
            await steps.reached()
            group.shutdown()
            steps.release()
            try await ran
            #expect(journal.all == ["start metrics", "stopped metrics"], "stopped at await point \(step)")
        }
    }

    @Test(
        "a stop while services are being made reaches a wait only its stop ends (a broker's metadata, retried), though the making is cancelled too",
        .timeLimit(.minutes(1)))
    func stoppedWhileWaitingForABroker() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .later("worker") {
                    let stopped = Atomic<Bool>(false)
                    await withGracefulShutdown(
                        of: [GracefulShutdown.current], stop: { stopped.store(true, ordering: .relaxed) }
                    ) {
                        journal.note("waiting for the broker")
                        // Ends only by its stop: cancelled, the sleep returns at once and the loop would spin.
                        while !stopped.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(5)) }
                    }
                    return [.init("runtime", Recorder(name: "runtime", journal: journal))]
                },
            ], logger: Self.logger)
        async let ran: Void = group.run()
        while !journal.all.contains("waiting for the broker") { try await Task.sleep(for: .milliseconds(5)) }
        group.shutdown()
        try await ran
        #expect(journal.all.filter { $0.hasSuffix("runtime") }.isEmpty, "nothing made after the stop starts")
        #expect(journal.all.last == "stopped metrics")
    }

    @Test("services that cannot be made (a topic missing) stop the group with that error")
    func makingFails() async throws {
        let journal = Journal()
        let group = ServiceGroup(
            [
                .init("metrics", Recorder(name: "metrics", journal: journal)),
                .later("worker") { throw Failure(name: "topics.jobs missing") },
                .init("receiver", Recorder(name: "receiver", journal: journal)),
            ], logger: Self.logger)
        await #expect(throws: Failure(name: "topics.jobs missing")) { try await group.run() }
        #expect(journal.all.filter { $0.hasSuffix("receiver") }.isEmpty)
        #expect(journal.all.last == "stopped metrics")
    }

    @Test("cancelling the group's task ends every service, and no shutdown is reported as triggered")
    func cancellation() async throws {
        let journal = Journal()
        let group = ServiceGroup([.init("metrics", Recorder(name: "metrics", journal: journal))], logger: Self.logger)
        let task = Task { try await group.run() }
        while journal.all.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        task.cancel()
        try await task.value
        #expect(journal.all == ["start metrics", "stopped metrics"])
    }

    @Test("an hourly chore ends at once on its shutdown, and runs no round after it")
    func periodicStops() async throws {
        let rounds = Atomic<Int>(0)
        let chore = PeriodicService(every: .seconds(3_600)) { rounds.add(1, ordering: .relaxed) }
        let group = ServiceGroup([.init("chore", chore)], logger: Self.logger)
        let started = ContinuousClock.now
        async let ran: Void = group.run()
        while rounds.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        group.shutdown()
        try await ran
        // Far below the hour (a busy machine may take seconds to run the stop), so only the sleep could hold it.
        #expect(ContinuousClock.now - started < .seconds(120), "the hour's sleep held the stop")
        #expect(rounds.load(ordering: .relaxed) == 1)
    }

    @Test("a traced chore's every round is a recorded root, current while it runs: what it calls adds spans beneath")
    func choreRoundsTraced() async throws {
        let spans = Mutex<[FinishedSpan]>([])
        let tracer = Tracer(sampleRatio: 0) { span in spans.withLock { $0.append(span) } }
        let chore = PeriodicService(every: .seconds(3_600)) {
            await Span.inCurrentChild("ledger batch", kind: .internal) {}
        }.traced("notification sweep", by: tracer)
        let group = ServiceGroup([.init("chore", chore)], logger: Self.logger)
        async let ran: Void = group.run()
        while spans.withLock({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(5)) }
        group.shutdown()
        try await ran
        let recorded = spans.withLock { $0 }
        let root = try #require(recorded.first { $0.name == "notification sweep" })
        let inner = try #require(recorded.first { $0.name == "ledger batch" })
        #expect(root.parentSpanID == nil && root.context.sampled, "recorded though the ratio samples no root")
        #expect(inner.parentSpanID == root.context.spanID && inner.context.traceID == root.context.traceID)
        // Outside any span, a layer adds none.
        let before = spans.withLock { $0.count }
        await Span.inCurrentChild("ledger batch", kind: .internal) {}
        #expect(spans.withLock { $0.count } == before)
    }

    @Test("a waiter cancelled before the shutdown returns, and the shutdown is still not triggered")
    func waitCancelled() async {
        let shutdown = GracefulShutdown()
        let waiter = Task { await shutdown.wait() }
        waiter.cancel()
        await waiter.value
        #expect(!shutdown.isTriggered)
        let sleeper = ContinuousClock.now
        await shutdown.sleep(for: .milliseconds(20))
        #expect(ContinuousClock.now - sleeper >= .milliseconds(20))
        shutdown.trigger()
        await shutdown.wait()  // returns at once once triggered
    }
}
