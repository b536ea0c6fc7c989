import Foundation
import Ledger
import TestSupport
import Testing

/// The same behaviour from both backends: SQLite in a temporary file, and the real PostgreSQL the test
/// command starts (POSTGRES_URL), in a fresh database per test.
enum Backend: String, CaseIterable, Sendable {
    case sqlite, postgresql

    func open() async throws -> any Ledger {
        switch self {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID()).sqlite").path
            return try await LedgerFactory.open(url: "sqlite:\(path)")
        case .postgresql:
            return try await LedgerFactory.open(url: try makePostgresDatabase(), poolSize: 8)
        }
    }
}

/// Records as the worker does, retrying a ledger error (up to `attempts` times, 20 ms apart).
func recordRetrying(
    _ ledger: any Ledger, jobID: String, claim: LedgerClaim, event: Data, attempts: Int = 20
) async throws -> Outcome {
    for _ in 0..<attempts {
        if let outcome = try? await ledger.record(jobID: jobID, claim: claim, event: event) { return outcome }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw LedgerError(.unavailable, "no answer for \(jobID)")
}

@Suite("The ledger, on SQLite and on a real PostgreSQL", .timeLimit(.minutes(1)))
struct LedgerTests {
    let grantEvent = Data(#"{"decision":"grant","event_id":"e1"}"#.utf8)

    @Test(
        "a grant is recorded once; the same job again replays the stored event unchanged", arguments: Backend.allCases)
    func replay(backend: Backend) async throws {
        let ledger = try await backend.open()
        #expect(
            try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "t1"), event: grantEvent)
                == .recorded)
        let again = try await ledger.record(
            jobID: "j1", claim: .grant(orderID: "o1", transactionID: "t1"), event: Data("different".utf8))
        #expect(again == .replay(grantEvent))
        #expect(try await ledger.storedEvent(jobID: "j1") == grantEvent)
        #expect(try await ledger.storedEvent(jobID: "unknown") == nil)
        await ledger.close()
    }

    @Test("the same transaction for another order is duplicate_transaction", arguments: Backend.allCases)
    func duplicateTransaction(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "t1"), event: grantEvent)
        #expect(
            try await ledger.record(jobID: "j2", claim: .grant(orderID: "o2", transactionID: "t1"), event: grantEvent)
                == .duplicateTransaction)
        // The deny is then recorded for that job, and replayed on re-delivery.
        let deny = Data(#"{"decision":"deny"}"#.utf8)
        #expect(try await ledger.record(jobID: "j2", claim: .deny, event: deny) == .recorded)
        #expect(
            try await ledger.record(jobID: "j2", claim: .grant(orderID: "o2", transactionID: "t1"), event: grantEvent)
                == .replay(deny))
        await ledger.close()
    }

    @Test("another transaction for a granted order is order_already_fulfilled", arguments: Backend.allCases)
    func orderAlreadyFulfilled(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "t1"), event: grantEvent)
        #expect(
            try await ledger.record(jobID: "j2", claim: .grant(orderID: "o1", transactionID: "t2"), event: grantEvent)
                == .orderAlreadyFulfilled)
        await ledger.close()
    }

    @Test("a second job for the same order and transaction is granted again (same grant)", arguments: Backend.allCases)
    func sameGrantTwice(backend: Backend) async throws {
        let ledger = try await backend.open()
        _ = try await ledger.record(jobID: "j1", claim: .grant(orderID: "o1", transactionID: "t1"), event: grantEvent)
        #expect(
            try await ledger.record(jobID: "j2", claim: .grant(orderID: "o1", transactionID: "t1"), event: grantEvent)
                == .recorded)
        await ledger.close()
    }

    @Test(
        "one transaction claimed by 50 orders at the same moment is granted exactly once", arguments: Backend.allCases)
    func concurrentClaims(backend: Backend) async throws {
        let ledger = try await backend.open()
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for order in 0..<50 {
                group.addTask {
                    try await ledger.record(
                        jobID: "job-\(order)", claim: .grant(orderID: "order-\(order)", transactionID: "same"),
                        event: grantEvent)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .recorded }.count == 1)
        #expect(outcomes.filter { $0 == .duplicateTransaction }.count == 49)
        await ledger.close()
    }

    @Test(
        "ids and events with quotes, backslashes, commas, braces and non-ASCII survive batched calls",
        arguments: Backend.allCases)
    func awkwardText(backend: Backend) async throws {
        let ledger = try await backend.open()
        let ids = (0..<300).map { #"job "\#($0)", {x}\y, NULL, é✓"# }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, id) in ids.enumerated() {
                group.addTask {
                    let event = Data(#"{"job_id":"\#(index)","detail":"a \"quoted\" \\ value, {braces}"}"#.utf8)
                    let claim = LedgerClaim.grant(orderID: #"order "\#(index)""#, transactionID: "t,\(index)")
                    let outcome = try await ledger.record(jobID: id, claim: claim, event: event)
                    let stored = try await ledger.storedEvent(jobID: id)
                    #expect(outcome == .recorded)
                    #expect(stored == event)
                }
            }
            try await group.waitForAll()
        }
        #expect(try await ledger.storedEvent(jobID: "NULL") == nil)
        await ledger.close()
    }

    @Test(
        "two replicas racing for the same 100 transactions in opposite orders: each granted once, no deadlock surfaces")
    func replicasRace() async throws {
        let url = try makePostgresDatabase()
        let first = try await LedgerFactory.open(url: url, poolSize: 4)
        let second = try await LedgerFactory.open(url: url, poolSize: 4)
        let outcomes = try await withThrowingTaskGroup(of: (String, Outcome).self) { group in
            for (side, ledger, order) in [("a", first, Array(0..<100)), ("b", second, Array((0..<100).reversed()))] {
                for transaction in order {
                    group.addTask {
                        let claim = LedgerClaim.grant(
                            orderID: "\(side)-order-\(transaction)", transactionID: "t\(transaction)")
                        let outcome = try await recordRetrying(
                            ledger, jobID: "\(side)-\(transaction)", claim: claim, event: grantEvent)
                        return ("t\(transaction)", outcome)
                    }
                }
            }
            return try await group.reduce(into: [(String, Outcome)]()) { $0.append($1) }
        }
        for transaction in 0..<100 {
            let answers = outcomes.filter { $0.0 == "t\(transaction)" }.map(\.1)
            #expect(answers.filter { $0 == .recorded }.count == 1, "t\(transaction): \(answers)")
            #expect(answers.filter { $0 == .duplicateTransaction }.count == 1, "t\(transaction): \(answers)")
        }
        await first.close()
        await second.close()
    }

    @Test("after PostgreSQL drops every connection, the pool replaces them and the ledger answers again")
    func poolHeals() async throws {
        let url = try makePostgresDatabase()
        let ledger = try await LedgerFactory.open(url: url, poolSize: 4)
        #expect(try await ledger.record(jobID: "before", claim: .deny, event: grantEvent) == .recorded)
        let database = String(url[url.index(after: url.lastIndex(of: "/")!)...])
        #expect(
            runPsql(
                url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()"
            ) == 0)
        // Each broken connection fails one call (the worker retries it) and is replaced.
        var answered = false
        for _ in 0..<20 where !answered {
            answered = (try? await ledger.storedEvent(jobID: "before")) == grantEvent
        }
        #expect(answered)
        var recorded: Outcome?
        for _ in 0..<20 where recorded == nil {
            recorded = try? await ledger.record(jobID: "after", claim: .deny, event: grantEvent)
        }
        #expect(recorded == .recorded)
        await ledger.close()
    }

    @Test("a ledger answers ping", arguments: Backend.allCases)
    func ping(backend: Backend) async throws {
        let ledger = try await backend.open()
        try await ledger.ping()
        await ledger.close()
    }

    @Test("an unknown ledger.url scheme is refused with the key's name")
    func badURL() async {
        let error = await #expect(throws: LedgerError.self) { _ = try await LedgerFactory.open(url: "mysql://x") }
        #expect(error?.reason.contains("ledger.url") == true)
    }
}
