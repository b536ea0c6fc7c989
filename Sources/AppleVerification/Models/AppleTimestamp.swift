public import Foundation

/// Apple's times, milliseconds since the epoch, read without trusting them.
///
/// A time Apple sends is a `Double` in signed payloads (fractional in Xcode's StoreKit testing) and a
/// decimal string in verifyReceipt answers. Either may be hostile: a payload is decoded before its signature
/// is checked, and a proxy can rewrite an answer. Only times from 1970 to the end of year 9999 are accepted:
/// every later conversion (`time_t`, `Int64` milliseconds, an RFC 3339 year of four digits) holds them.
public enum AppleTimestamp {
    /// 1970-01-01T00:00:00Z ... 9999-12-31T23:59:59.999Z, in milliseconds.
    static let validMilliseconds: ClosedRange<Double> = 0...253_402_300_799_999

    /// The date of a time in milliseconds, or nil when it is not finite or outside ``validMilliseconds``.
    public static func date(milliseconds: Double) -> Date? {
        guard milliseconds.isFinite, validMilliseconds.contains(milliseconds) else { return nil }
        return Date(timeIntervalSince1970: milliseconds / 1000)
    }

    /// Seconds since the epoch, for a time in milliseconds inside ``validMilliseconds``.
    static func seconds(milliseconds: Double) -> Double? {
        date(milliseconds: milliseconds).map { $0.timeIntervalSince1970 }
    }

    /// The date of a verifyReceipt millisecond string: decimal digits, an optional fraction, nothing else.
    /// Exponents (`1e30`), signs (`-9999999999999999999`), `inf`, `nan` and hexadecimal, all of which
    /// `Double.init` would read, are refused.
    package static func date(millisecondsText text: String) -> Date? {
        let utf8 = text.utf8
        guard (1...32).contains(utf8.count) else { return nil }
        var digitsBeforePoint = 0
        var digitsAfterPoint = 0
        var sawPoint = false
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if sawPoint { digitsAfterPoint += 1 } else { digitsBeforePoint += 1 }
            case UInt8(ascii: ".") where !sawPoint:
                sawPoint = true
            default:
                return nil
            }
        }
        guard digitsBeforePoint > 0, !sawPoint || digitsAfterPoint > 0, let value = Double(text) else { return nil }
        return date(milliseconds: value)
    }
}
