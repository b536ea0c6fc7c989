import Kafka
import Testing

@testable import Runtime

@Suite("Slots by group: one group waiting never holds another's")
struct GroupSchedulerTests {
    func item(_ group: String, offset: Int64, partition: Int32 = 0, bytes: Int = 10) -> GroupScheduler.Item {
        GroupScheduler.Item(
            message: InboundMessage(
                topic: "jobs", partition: partition, offset: offset, key: nil,
                value: [UInt8](repeating: 0, count: bytes),
                headers: [], timestamp: nil),
            generation: 1, intake: Intake(group: group), route: 0)
    }

    /// The items handed out so far, without waiting for more.
    func started(_ scheduler: GroupScheduler, _ count: Int) async -> [GroupScheduler.Item] {
        var items: [GroupScheduler.Item] = []
        for _ in 0..<count { if let next = await scheduler.next() { items.append(next) } }
        return items
    }

    @Test("a group with every slot held waits alone: another group's message starts at once")
    func groupsAreIsolated() async {
        let scheduler = GroupScheduler(maxInFlight: 3, maxInFlightBytes: 1_000_000)
        for offset in 0..<5 as Range<Int64> { scheduler.enqueue(item("game-a", offset: offset)) }
        scheduler.enqueue(item("game-b", offset: 5))
        let running = await started(scheduler, 4)
        #expect(running.map(\.group) == ["game-a", "game-a", "game-a", "game-b"])
        let snapshot = Dictionary(uniqueKeysWithValues: scheduler.snapshot().groups.map { ($0.group, $0) })
        #expect(snapshot["game-a"]?.running == 3 && snapshot["game-a"]?.waiting == 2)
        #expect(snapshot["game-b"]?.running == 1 && snapshot["game-b"]?.waiting == 0)
        // A finished message of game A starts the next one waiting in game A, in arrival order.
        scheduler.release(running[0])
        #expect(await scheduler.next()?.message.offset == 3)
    }

    @Test(
        "a group is full when its waiting room (ten budgets, a quarter of the bytes) is, and until it is back to half")
    func fullAndRoom() async {
        let scheduler = GroupScheduler(maxInFlight: 2, maxInFlightBytes: 1_000_000)
        for offset in 0..<21 as Range<Int64> { scheduler.enqueue(item("game-a", offset: offset)) }
        #expect(!scheduler.isFull("game-a"), "two running and 19 waiting")
        #expect(scheduler.pressure().fullGroups.isEmpty)
        scheduler.enqueue(item("game-a", offset: 21))
        #expect(scheduler.isFull("game-a"), "two running and 20 waiting")
        #expect(scheduler.pressure() == .init(memoryFull: false, fullGroups: ["game-a"]))
        #expect(!scheduler.isFull("game-b"), "another game is not")
        var running = await started(scheduler, 2)
        scheduler.release(running[0])
        #expect(scheduler.isFull("game-a"), "19 waiting: over half the room, still full")
        for _ in 0..<9 {
            running = await started(scheduler, 1)
            scheduler.release(running[0])
        }
        #expect(scheduler.pressure().fullGroups.isEmpty, "10 waiting: half the room")
        #expect(!scheduler.isFull("game-a"))
        // Bytes: a quarter of the budget waiting fills a room at once.
        let bytes = GroupScheduler(maxInFlight: 100, maxInFlightBytes: 1_000)
        bytes.enqueue(item("game-b", offset: 0, bytes: 900))
        bytes.enqueue(item("game-b", offset: 1, bytes: 200))
        #expect(!bytes.isFull("game-b"), "200 bytes waiting")
        bytes.enqueue(item("game-b", offset: 2, bytes: 100))
        #expect(bytes.isFull("game-b"), "300 bytes waiting: more than a quarter of 1,000")
    }

    @Test(
        "the replica holds at most twice the byte budget, however many groups: then every topic pauses, until one budget"
    )
    func memoryBound() async {
        let scheduler = GroupScheduler(maxInFlight: 10, maxInFlightBytes: 1_000)
        // Ten games, each with one 150-byte job running: 1,500 bytes, under the 2,000 bound.
        for game in 0..<10 { scheduler.enqueue(item("game-\(game)", offset: Int64(game), bytes: 150)) }
        #expect(!scheduler.pressure().memoryFull)
        for game in 0..<4 { scheduler.enqueue(item("game-\(game)", offset: Int64(10 + game), bytes: 150)) }
        #expect(scheduler.pressure().memoryFull, "2,100 bytes held")
        let running = await started(scheduler, 14)
        for item in running.prefix(5) { scheduler.release(item) }
        #expect(scheduler.pressure().memoryFull, "1,350 bytes: over one budget, still full")
        for item in running.dropFirst(5).prefix(3) { scheduler.release(item) }
        #expect(!scheduler.pressure().memoryFull, "900 bytes")
    }

    @Test("a parked message starts at once outside its group's budget, and counts in the replica's bytes")
    func parked() async {
        let scheduler = GroupScheduler(maxInFlight: 1, maxInFlightBytes: 1_000)
        scheduler.enqueue(item("game-a", offset: 0))
        var parked = item("game-a", offset: 1, bytes: 2_100)
        parked.parkTo = GroupScheduler.ParkTarget(topic: "retries", partition: 0)
        scheduler.enqueueParked(parked)
        let running = await started(scheduler, 2)
        #expect(running.map(\.message.offset) == [0, 1])
        #expect(scheduler.snapshot().parking == 1 && scheduler.snapshot().groups.first?.running == 1)
        #expect(scheduler.pressure().memoryFull)
        scheduler.release(running[1])
        #expect(scheduler.snapshot().parking == 0 && !scheduler.pressure().memoryFull)
    }

    @Test("bytes are budgeted too; a message larger than the whole budget still starts, alone")
    func bytes() async {
        let scheduler = GroupScheduler(maxInFlight: 10, maxInFlightBytes: 100)
        scheduler.enqueue(item("game-a", offset: 0, bytes: 60))
        scheduler.enqueue(item("game-a", offset: 1, bytes: 60))
        let first = await started(scheduler, 1)
        #expect(scheduler.snapshot().groups.first?.waiting == 1, "60 + 60 is over half of 100")
        scheduler.release(first[0])
        let second = await started(scheduler, 1)
        #expect(second.first?.message.offset == 1)
        scheduler.release(second[0])
        scheduler.enqueue(item("game-a", offset: 2, bytes: 500))
        #expect(await scheduler.next()?.message.offset == 2)
    }

    @Test("a revocation takes out what has not started, waiting or ready, and gives its slots back")
    func revocation() async {
        let scheduler = GroupScheduler(maxInFlight: 2, maxInFlightBytes: 1_000_000)
        scheduler.enqueue(item("game-a", offset: 0, partition: 0))
        scheduler.enqueue(item("game-a", offset: 1, partition: 1))
        scheduler.enqueue(item("game-a", offset: 2, partition: 1))
        scheduler.enqueue(item("game-a", offset: 3, partition: 0))
        let removed = scheduler.remove([TopicPartition(topic: "jobs", partition: 1)])
        #expect(Set(removed.map(\.message.offset)) == [1, 2])
        let running = await started(scheduler, 2)
        #expect(running.map(\.message.offset) == [0, 3])
        #expect(scheduler.finish().isEmpty)
        #expect(await scheduler.next() == nil)
    }
}
