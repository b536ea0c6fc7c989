import Kafka
import Testing

@testable import Runtime

@Suite("Slots by group: one group waiting never holds another's")
struct GroupSchedulerTests {
    func item(_ group: String, offset: Int64, partition: Int32 = 0, bytes: Int = 10) -> GroupScheduler.Item {
        GroupScheduler.Item(
            message: KafkaMessage(
                topic: "jobs", partition: partition, offset: offset, key: nil,
                value: [UInt8](repeating: 0, count: bytes),
                headers: [], timestamp: nil),
            generation: 1, group: group, route: 0)
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
        let snapshot = Dictionary(uniqueKeysWithValues: scheduler.snapshot().map { ($0.group, $0) })
        #expect(snapshot["game-a"]?.running == 3 && snapshot["game-a"]?.waiting == 2)
        #expect(snapshot["game-b"]?.running == 1 && snapshot["game-b"]?.waiting == 0)
        // A finished message of game A starts the next one waiting in game A, in arrival order.
        scheduler.release(running[0])
        #expect(await scheduler.next()?.message.offset == 3)
    }

    @Test("intake pauses when a group's waiting room (ten budgets, one in bytes) is full, and resumes at half")
    func fullAndRoom() async {
        let scheduler = GroupScheduler(maxInFlight: 2, maxInFlightBytes: 1_000)
        for offset in 0..<21 as Range<Int64> { scheduler.enqueue(item("game-a", offset: offset)) }
        #expect(!scheduler.isFull, "two running and 19 waiting")
        scheduler.enqueue(item("game-a", offset: 21))
        #expect(scheduler.isFull, "two running and 20 waiting")
        let running = await started(scheduler, 2)
        scheduler.release(running[0])
        #expect(!scheduler.isFull)
        #expect(!scheduler.hasRoom, "19 waiting, over half the room")
        // Bytes: 100 waiting bytes of another group's large messages fill its room at once.
        let bytes = GroupScheduler(maxInFlight: 100, maxInFlightBytes: 1_000)
        bytes.enqueue(item("game-b", offset: 0, bytes: 900))
        bytes.enqueue(item("game-b", offset: 1, bytes: 900))
        #expect(!bytes.isFull)
        bytes.enqueue(item("game-b", offset: 2, bytes: 200))
        #expect(bytes.isFull, "1,100 bytes waiting")
    }

    @Test("bytes are budgeted too; a message larger than the whole budget still starts, alone")
    func bytes() async {
        let scheduler = GroupScheduler(maxInFlight: 10, maxInFlightBytes: 100)
        scheduler.enqueue(item("game-a", offset: 0, bytes: 60))
        scheduler.enqueue(item("game-a", offset: 1, bytes: 60))
        let first = await started(scheduler, 1)
        #expect(scheduler.snapshot().first?.waiting == 1, "60 + 60 is over 100")
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
        let removed = scheduler.remove([KafkaTopicPartition(topic: "jobs", partition: 1)])
        #expect(Set(removed.map(\.message.offset)) == [1, 2])
        let running = await started(scheduler, 2)
        #expect(running.map(\.message.offset) == [0, 3])
        #expect(scheduler.finish().isEmpty)
        #expect(await scheduler.next() == nil)
    }
}
