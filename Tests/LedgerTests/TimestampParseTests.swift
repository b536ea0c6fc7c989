import Foundation
import Observability
import Testing

/// The SQLite ledger keeps its times as the text ``Timestamp/rfc3339(_:)`` writes, and reads them back by hand.
@Suite("The ledger's times read back")
struct TimestampParseTests {
    @Test("what rfc3339 writes reads back to the same millisecond, across the years it can write")
    func roundTrip() {
        for seconds in [0, 1_733_300_000.123, -1_000_000.5, 253_402_300_799.999, 951_782_400.001] {
            let date = Date(timeIntervalSince1970: seconds)
            let parsed = Timestamp.parse(Timestamp.rfc3339(date))
            #expect(parsed.map { abs($0.timeIntervalSince1970 - seconds) < 0.0005 } == true, "\(seconds)")
        }
    }

    @Test("a fraction of one to nine digits counts in milliseconds; anything else is no time")
    func hostile() {
        #expect(Timestamp.parse("2026-11-30T17:26:36Z")?.timeIntervalSince1970 == 1_796_059_596)
        #expect(Timestamp.parse("2026-11-30T17:26:36.5Z")?.timeIntervalSince1970 == 1_796_059_596.5)
        #expect(Timestamp.parse("2026-11-30T17:26:36.123456789Z")?.timeIntervalSince1970 == 1_796_059_596.123)
        for text in [
            "", "2026-11-30", "2026-11-30T17:26:36", "2026-11-30 17:26:36.123Z", "2026-11-30T17:26:36.Z",
            "2026-11-30T17:26:36.1234567890Z", "2026-1a-30T17:26:36.123Z", "٢٠٢٦-11-30T17:26:36.123Z",
            "2026-11-30T17:26:36.123+00:00", String(repeating: "9", count: 1000),
        ] {
            #expect(Timestamp.parse(text) == nil, "\(text)")
        }
    }
}
