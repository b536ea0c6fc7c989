import Foundation
import Testing
import Vocabulary

/// The ids `receipt-worker enqueue` makes for a job, and the contract recommends: UUIDs of version 7, whose text
/// sorts by the time they were made.
@Suite struct TimeOrderedUUIDTests {
    @Test("a version 7 UUID: lowercase, the time's milliseconds first, Foundation reads it back")
    func layout() throws {
        let milliseconds: UInt64 = 1_796_467_200_123  // 2026-12-05T10:40:00.123Z
        let id = TimeOrderedUUID.make(unixMilliseconds: milliseconds)
        let characters = Array(id)
        #expect(id.count == 36)
        #expect(
            String(characters[0..<8]) + String(characters[9..<13]) == String(milliseconds, radix: 16).leftPadded(12))
        #expect(characters[14] == "7")
        #expect("89ab".contains(characters[19]))
        #expect(id == id.lowercased())
        #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
    }

    @Test("ids sort by the time they were made; ids of one millisecond are all different")
    func order() {
        let start: UInt64 = 1_796_467_200_000
        let ids = (0..<2_000).map { TimeOrderedUUID.make(unixMilliseconds: start + UInt64($0 / 2) * 997) }
        for (earlier, later) in zip(ids, ids.dropFirst()) where earlier.prefix(13) != later.prefix(13) {
            #expect(earlier < later)
        }
        let sameMillisecond = (0..<1_000).map { _ in TimeOrderedUUID.make(unixMilliseconds: start) }
        #expect(Set(sameMillisecond).count == 1_000)
        #expect(Set(sameMillisecond.map { $0.prefix(13) }).count == 1)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
