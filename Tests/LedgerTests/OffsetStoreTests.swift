import Foundation
import Ledger
import Testing

/// What the ledger records of the consumer group's commits, so that a ledger that does not hold what the group
/// processed is refused at start-up (docs/internals.md, "A ledger that starts empty").
@Suite("The ledger and the group's offsets", .timeLimit(.minutes(1)))
struct OffsetStoreTests {
    let jobs0 = ConsumedPartition(topic: "receipt-jobs", partition: 0)
    let jobs1 = ConsumedPartition(topic: "receipt-jobs", partition: 1)

    @Test("offsets are recorded per group, each partition keeping its highest", arguments: Backend.allCases)
    func recordsHighest(backend: Backend) async throws {
        let ledger = try await backend.open()
        let fresh = try await ledger.recordedOffsets(group: "g")
        #expect(fresh.offsets.isEmpty && fresh.startedEmpty)
        try await ledger.recordOffsets([jobs0: 120, jobs1: 7], group: "g")
        try await ledger.recordOffsets([jobs0: 100], group: "g")  // a late, lower commit changes nothing
        try await ledger.recordOffsets([jobs0: 500], group: "other")
        #expect(try await ledger.recordedOffsets(group: "g").offsets == [jobs0: 120, jobs1: 7])
        await ledger.close()
    }

    @Test("a new ledger is behind a group that committed anything; one that recorded the commits is not")
    func behind() {
        let empty = RecordedOffsets(offsets: [:], startedEmpty: true)
        #expect(empty.behind([jobs0: 120]).map(\.0) == [jobs0])
        #expect(empty.behind([jobs0: 0]).isEmpty)
        let recorded = RecordedOffsets(offsets: [jobs0: 120], startedEmpty: true)
        #expect(recorded.behind([jobs0: 120]).isEmpty)
        #expect(recorded.behind([jobs0: 90]).isEmpty)  // the group reset backwards: jobs read again, fine
        #expect(recorded.behind([jobs0: 121, jobs1: 3]).map(\.0) == [jobs0, jobs1])
        // A ledger that held decisions before it recorded offsets cannot tell (replicas of the previous release
        // commit without recording during the rolling update): it is trusted.
        #expect(RecordedOffsets(offsets: [:], startedEmpty: false).behind([jobs0: 120]).isEmpty)
        #expect(RecordedOffsets(offsets: [jobs0: 10], startedEmpty: false).behind([jobs0: 11]).isEmpty)
    }
}
