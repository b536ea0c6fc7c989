import Kafka
import Synchronization
import Observability

/// Slots and bytes by group: each group (an app's jobs, the notifications, the consumption answers) has a
/// budget of its own, `maxInFlight` messages and half of `maxInFlightBytes` bytes being handled, and a waiting
/// room for ten times as many messages within a quarter of the bytes. So one group whose messages wait (its Apple
/// lane paused by a 429, its circuit open) holds only its own slots, and the other groups go on. A message
/// larger than the whole byte budget still starts, alone. Within a group messages start in arrival order.
///
/// Messages with a slot go to the one task that starts them (``next()``); a finished message gives its slot
/// back (``release(_:)``), which starts the next one waiting in its group.
///
/// A group whose waiting room is full stays full until it is back to half (``pressure()``): the runtime then
/// parks its new messages on another topic, or pauses the topics that feed it. The whole replica holds at
/// most twice `maxInFlightBytes` in messages (running, waiting and being parked): past that, every topic
/// pauses until it is back to one budget, so memory stays bounded however many groups there are.
final class GroupScheduler: Sendable {
    /// A message taken, its assignment, its group and its route; `parkTo`: where it is forwarded instead of
    /// being handled (its group's room was full).
    struct Item: Sendable {
        let message: InboundMessage
        let generation: UInt64
        let intake: Intake
        var group: String { intake.group }
        let route: Int
        var parkTo: ParkTarget? = nil
        /// Where its wait began (``Intake/waitStart``; a parked copy's at its first send), when measured.
        var waitStart: WaitStart? = nil
        /// When the runtime took it off its topic: its take-to-answer is measured from here.
        var takenAt = ContinuousClock.now
        var bytes: Int { message.value.count }
    }

    /// The park topic, and the partition of the group's lane (nil: the partitioner's choice).
    struct ParkTarget: Sendable {
        let topic: String
        let partition: Int32?
    }

    /// What the intake must do: pause every topic (`memoryFull`), or the topics feeding `fullGroups`.
    struct Pressure: Equatable, Sendable {
        var memoryFull = false
        var fullGroups: Set<String> = []
    }

    /// One group's budget in use, and its messages waiting for a slot (oldest first from `head`).
    private struct Group {
        var running = 0
        var runningBytes = 0
        var waiting: [Item] = []
        var head = 0
        var waitingBytes = 0

        var waitingCount: Int { waiting.count - head }
    }

    private struct State {
        var groups: [String: Group] = [:]
        /// Messages being forwarded to a park topic, and their bytes.
        var parking = 0
        var parkingBytes = 0
        /// Messages with a slot, for the starting task.
        var ready: [Item] = []
        var readyHead = 0
        var reader: UnsafeContinuation<Item?, Never>?
        var finished = false
        /// Groups whose room filled and has not yet emptied to half, and since when.
        var fullGroups: Set<String> = []
        var fullSince: [String: ContinuousClock.Instant] = [:]
        var memoryFull = false
    }

    private let state = Mutex(State())
    private let maxJobs: Int
    private let maxBytes: Int
    /// Messages a group may hold waiting: ten budgets.
    private var maxWaiting: Int { maxJobs * 10 }
    /// Bytes a group may hold waiting: a quarter of a budget (waiting is cheap in count, not in bytes).
    private var maxWaitingBytes: Int { max(1, maxBytes / 4) }

    /// `groups`: the groups known from the start, whose series show at 0 before their first message.
    init(maxInFlight: Int, maxInFlightBytes: Int, groups: [String] = []) {
        maxJobs = max(1, maxInFlight)
        maxBytes = max(1, maxInFlightBytes)
        state.withLock { state in for group in groups { state.groups[group] = Group() } }
    }

    /// Takes a message: it starts at once when its group has a slot, else it waits in its group.
    func enqueue(_ item: Item) {
        let reader = state.withLock { state -> UnsafeContinuation<Item?, Never>? in
            guard !state.finished else { return nil }
            // Taken out of the dictionary while it changes: a copy left there would make every append copy the
            // whole waiting room (it did: a fifth of the worker's CPU at 1,000 jobs in flight).
            var group = state.groups.removeValue(forKey: item.group) ?? Group()
            defer {
                state.groups[item.group] = group
                if isRoomFull(group) { Self.markFull(item.group, &state) }
            }
            guard group.waitingCount == 0, fits(item.bytes, group) else {
                group.waiting.append(item)
                group.waitingBytes += item.bytes
                return nil
            }
            group.running += 1
            group.runningBytes += item.bytes
            return deliver(item, &state)
        }
        reader?.resume(returning: item)
    }

    /// Takes a message to be forwarded to `item.parkTo`: it starts at once, outside its group's budget.
    func enqueueParked(_ item: Item) {
        let reader = state.withLock { state -> UnsafeContinuation<Item?, Never>? in
            guard !state.finished else { return nil }
            state.parking += 1
            state.parkingBytes += item.bytes
            return deliver(item, &state)
        }
        reader?.resume(returning: item)
    }

    /// Whether `group`'s waiting room is full, or filled and not yet back to half: its new messages are parked
    /// (or, when its topics cannot park, intake pauses).
    func isFull(_ group: String) -> Bool {
        state.withLock { state in
            state.fullGroups.contains(group) || state.groups[group].map(isRoomFull) == true
        }
    }

    /// The next message with a slot; nil once finished.
    func next() async -> Item? {
        // Under load a message is ready: taken without suspending (a continuation is made only to wait).
        if let ready = state.withLock({ Self.takeReady(&$0) }) { return ready }
        return await withUnsafeContinuation { continuation in
            let ready = state.withLock { state -> Item?? in
                if let ready = Self.takeReady(&state) { return ready }
                precondition(state.reader == nil, "GroupScheduler.next() has one reader")
                state.reader = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The next ready message; `.some(nil)` once finished with none ready; nil when the reader must wait.
    private static func takeReady(_ state: inout State) -> Item?? {
        if state.readyHead < state.ready.count {
            let item = state.ready[state.readyHead]
            state.readyHead += 1
            if state.readyHead > 1024 && state.readyHead * 2 > state.ready.count {
                state.ready.removeFirst(state.readyHead)
                state.readyHead = 0
            }
            return .some(item)
        }
        return state.finished ? .some(nil) : nil
    }

    /// Gives a finished message's slot back, and starts what waits in its group and now fits.
    func release(_ item: Item) {
        let started = state.withLock { state -> [(UnsafeContinuation<Item?, Never>, Item)] in
            if item.parkTo != nil {
                state.parking -= 1
                state.parkingBytes -= item.bytes
                return []
            }
            // Taken out and put back, as `enqueue` does: a change through the dictionary's optional subscript
            // allocated its accessor's frame at every call.
            guard var group = state.groups.removeValue(forKey: item.group) else { return [] }
            group.running -= 1
            group.runningBytes -= item.bytes
            state.groups[item.group] = group
            return fill(item.group, &state)
        }
        for (reader, next) in started { reader.resume(returning: next) }
    }

    /// Takes out the messages of revoked partitions that have not started (waiting in a group, or ready but not
    /// yet picked up): never started, so never committed past; the partitions' next owner reads them again.
    /// Returns them, for the book to mark them left.
    func remove(_ partitions: Set<TopicPartition>) -> [Item] {
        let (removed, started) = state.withLock { state -> ([Item], [(UnsafeContinuation<Item?, Never>, Item)]) in
            var removed: [Item] = []
            for name in Array(state.groups.keys) {
                guard var group = state.groups[name] else { continue }
                let waiting = group.waiting[group.head...]
                removed += waiting.filter { partitions.contains($0.message.topicPartition) }
                group.waiting = waiting.filter { !partitions.contains($0.message.topicPartition) }
                group.head = 0
                group.waitingBytes = group.waiting.reduce(0) { $0 + $1.bytes }
                state.groups[name] = group
            }
            let ready = state.ready[state.readyHead...]
            let leaving = ready.filter { partitions.contains($0.message.topicPartition) }
            state.ready = ready.filter { !partitions.contains($0.message.topicPartition) }
            state.readyHead = 0
            // Ready messages held slots: give them back (nothing started them), and start what now fits.
            for item in leaving {
                if item.parkTo != nil {
                    state.parking -= 1
                    state.parkingBytes -= item.bytes
                } else {
                    state.groups[item.group]?.running -= 1
                    state.groups[item.group]?.runningBytes -= item.bytes
                }
            }
            var started: [(UnsafeContinuation<Item?, Never>, Item)] = []
            for name in Array(state.groups.keys) { started += fill(name, &state) }
            return (removed + leaving, started)
        }
        for (reader, next) in started { reader.resume(returning: next) }
        return removed
    }

    /// Starts what waits in `name` and fits its budget now.
    private func fill(_ name: String, _ state: inout State) -> [(UnsafeContinuation<Item?, Never>, Item)] {
        guard var group = state.groups.removeValue(forKey: name) else { return [] }
        var started: [(UnsafeContinuation<Item?, Never>, Item)] = []
        while group.waitingCount > 0, fits(group.waiting[group.head].bytes, group), !state.finished {
            let next = group.waiting[group.head]
            group.head += 1
            group.waitingBytes -= next.bytes
            group.running += 1
            group.runningBytes += next.bytes
            if let reader = deliver(next, &state) { started.append((reader, next)) }
        }
        if group.head > 1024 && group.head * 2 > group.waiting.count {
            group.waiting.removeFirst(group.head)
            group.head = 0
        }
        // Kept when idle: groups are few (the apps, and a group per other flow) and their series stay.
        state.groups[name] = group
        return started
    }

    /// Ends ``next()`` for good (shutdown): what waits is left to be read again after the restart. Returns
    /// what had not started.
    func finish() -> [Item] {
        let (reader, left) = state.withLock { state -> (UnsafeContinuation<Item?, Never>?, [Item]) in
            state.finished = true
            var left = Array(state.ready[state.readyHead...])
            for group in state.groups.values { left += group.waiting[group.head...] }
            state.ready = []
            state.readyHead = 0
            for name in Array(state.groups.keys) {
                state.groups[name]?.waiting = []
                state.groups[name]?.head = 0
                state.groups[name]?.waitingBytes = 0
            }
            defer { state.reader = nil }
            return (state.reader, left)
        }
        reader?.resume(returning: nil)
        return left
    }

    /// What the intake must do now. A group is full from the moment its room is (count or bytes) until it is
    /// back to half; memory is full from twice the byte budget held until one budget.
    func pressure() -> Pressure {
        state.withLock { state in
            var held = state.parkingBytes
            for (name, group) in state.groups {
                held += group.runningBytes + group.waitingBytes
                if isRoomFull(group) {
                    Self.markFull(name, &state)
                } else if group.waitingCount <= maxWaiting / 2 && group.waitingBytes <= maxWaitingBytes / 2 {
                    state.fullGroups.remove(name)
                    state.fullSince[name] = nil
                }
            }
            if held >= 2 * maxBytes {
                state.memoryFull = true
            } else if held <= maxBytes {
                state.memoryFull = false
            }
            return Pressure(memoryFull: state.memoryFull, fullGroups: state.fullGroups)
        }
    }

    /// Per group: messages being handled, their bytes, and messages waiting; `parked`: being forwarded.
    func snapshot() -> (groups: [(group: String, running: Int, bytes: Int, waiting: Int)], parking: Int) {
        state.withLock { state in
            (
                state.groups.map { ($0.key, $0.value.running, $0.value.runningBytes, $0.value.waitingCount) },
                state.parking
            )
        }
    }

    /// Per group, how long its room has been full (its new messages parked, or its topics paused): 0 when not.
    func fullDurations() -> [(group: String, seconds: Double)] {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.groups.keys.map { name in (name, state.fullSince[name].map { (now - $0).inSeconds } ?? 0) }
        }
    }

    private static func markFull(_ name: String, _ state: inout State) {
        state.fullGroups.insert(name)
        if state.fullSince[name] == nil { state.fullSince[name] = .now }
    }

    private func isRoomFull(_ group: Group) -> Bool {
        group.waitingCount >= maxWaiting || group.waitingBytes >= maxWaitingBytes
    }

    /// A slot free, and the bytes within half the budget: one group, however stuck, holds at most three
    /// quarters of a budget (running and waiting), so the replica's bytes can fall back to one budget, and
    /// intake resume, while it stays stuck. A message larger than that still starts, alone.
    private func fits(_ bytes: Int, _ group: Group) -> Bool {
        group.running < maxJobs && (group.runningBytes + bytes <= maxBytes / 2 || group.running == 0)
    }

    /// Hands an item with a slot to the reader waiting for one, or queues it for the next ``next()``.
    private func deliver(_ item: Item, _ state: inout State) -> UnsafeContinuation<Item?, Never>? {
        if let reader = state.reader {
            state.reader = nil
            return reader
        }
        state.ready.append(item)
        return nil
    }
}
