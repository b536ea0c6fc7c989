import Kafka
import Testing

@testable import Runtime

@Suite("The runtime's partition bookkeeping across assignments")
struct PartitionBookTests {
    @Test("a message of an earlier assignment cannot finish or abandon the same offset in flight again")
    func staleMessages() {
        let state = PartitionBook()
        let partition = TopicPartition(topic: "jobs", partition: 0)
        state.assign([partition])
        let first = state.generation(of: partition)
        #expect(state.take(partition, offset: 5, generation: first))
        state.stopTaking([partition])
        state.release([partition])
        state.assign([partition])
        let second = state.generation(of: partition)
        #expect(second != first)
        #expect(!state.take(partition, offset: 7, generation: first), "a message read before the release")
        #expect(state.take(partition, offset: 5, generation: second))
        // The first assignment's job ends late: it must not touch the second's.
        state.abandon(partition, offset: 5, generation: first)
        state.finish(partition, offset: 5, generation: first)
        #expect(state.outstanding(in: [partition]) == 1)
        #expect(state.committable()[partition] == 5)
        state.finish(partition, offset: 5, generation: second)
        #expect(state.outstanding(in: [partition]) == 0)
        #expect(state.committable()[partition] == 6)
    }
}
