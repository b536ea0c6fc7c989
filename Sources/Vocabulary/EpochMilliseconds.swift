public import Foundation

/// A date as whole milliseconds since 1970, never a trapping conversion: clamped to years 0001...9999 (what RFC 3339
/// can write), NaN to the epoch. Dates from outside reach here (a record's CreateTime near `Int64.max`, a command
/// line's `--since`), and `Int64(_:)` of a Double past `Int64.max` stops the process.
public enum EpochMilliseconds {
    public static let range: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999

    public static func of(_ date: Date, rounding rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int64 {
        let raw = (date.timeIntervalSince1970 * 1000).rounded(rule)
        guard !raw.isNaN else { return 0 }
        return Int64(min(max(raw, Double(range.lowerBound)), Double(range.upperBound)))
    }
}
