import Foundation
import Observability
import Testing
import Vocabulary

/// The one RFC 3339 writer and reader: the SQLite ledger keeps its times as the text ``RFC3339/format(_:)`` writes;
/// a job's `submitted_at`, a command's `--since` and the desk's API are read by ``RFC3339/parse(_:)``.
@Suite("RFC 3339 times written and read back")
struct RFC3339Tests {
    @Test("what rfc3339 writes reads back to the same millisecond, across the years it can write")
    func roundTrip() {
        for seconds in [0, 1_733_300_000.123, -1_000_000.5, 253_402_300_799.999, 951_782_400.001] {
            let date = Date(timeIntervalSince1970: seconds)
            let parsed = RFC3339.parse(RFC3339.format(date))
            #expect(parsed.map { abs($0.timeIntervalSince1970 - seconds) < 0.0005 } == true, "\(seconds)")
        }
    }

    @Test("a fraction counts in milliseconds, an offset moves the time; anything else is no time")
    func hostile() {
        #expect(RFC3339.parse("2026-11-30T17:26:36Z")?.timeIntervalSince1970 == 1_796_059_596)
        #expect(RFC3339.parse("2026-11-30T17:26:36.5Z")?.timeIntervalSince1970 == 1_796_059_596.5)
        #expect(RFC3339.parse("2026-11-30T17:26:36.123456789Z")?.timeIntervalSince1970 == 1_796_059_596.123)
        #expect(RFC3339.parse("2026-11-30T17:26:36.1234567890123Z")?.timeIntervalSince1970 == 1_796_059_596.123)
        #expect(RFC3339.parse("2026-11-30T17:26:36.123+00:00")?.timeIntervalSince1970 == 1_796_059_596.123)
        #expect(RFC3339.parse("2026-11-30T18:26:36+01:00")?.timeIntervalSince1970 == 1_796_059_596)
        #expect(RFC3339.parse("2026-11-30T16:56:36-00:30")?.timeIntervalSince1970 == 1_796_059_596)
        for text in [
            "", "2026-11-30", "2026-11-30T17:26:36", "2026-11-30 17:26:36.123Z", "2026-11-30T17:26:36.Z",
            "2026-1a-30T17:26:36.123Z", "٢٠٢٦-11-30T17:26:36.123Z", "２０26-11-30T17:26:36Z", "2026-02-30T17:26:36Z",
            "2026-11-30T24:00:00Z", "9999-99-99T99:99:99Z", "2026-11-30T17:26:36+24:00", "2026-11-30T17:26:36+0100",
            "2026-11-30T17:26:36.12a4Z", "2026-11-30T17:26:36." + String(repeating: "9", count: 30) + "Z",
            String(repeating: "9", count: 1000),
        ] {
            #expect(RFC3339.parse(text) == nil, "\(text)")
        }
    }

    @Test("a date from outside becomes milliseconds without trapping: past Int64, NaN and infinities are clamped")
    func epochMillisecondsClamped() {
        // A record's CreateTime near Int64.max (a producer's sentinel) comes back from Double past it.
        let sentinel = Date(timeIntervalSince1970: Double(Int64.max) / 1000)
        #expect(EpochMilliseconds.of(sentinel) == EpochMilliseconds.range.upperBound)
        #expect(EpochMilliseconds.of(sentinel, rounding: .towardZero) == EpochMilliseconds.range.upperBound)
        #expect(EpochMilliseconds.of(Date(timeIntervalSince1970: -.infinity)) == EpochMilliseconds.range.lowerBound)
        #expect(EpochMilliseconds.of(Date(timeIntervalSince1970: .infinity)) == EpochMilliseconds.range.upperBound)
        #expect(EpochMilliseconds.of(Date(timeIntervalSince1970: .nan)) == 0)
        #expect(EpochMilliseconds.of(Date(timeIntervalSince1970: 1_796_059_596.1234)) == 1_796_059_596_123)
        #expect(
            EpochMilliseconds.of(Date(timeIntervalSince1970: 1_796_059_596.1236), rounding: .down) == 1_796_059_596_123)
        #expect(RFC3339.format(sentinel) == "9999-12-31T23:59:59.999Z")
    }
}
