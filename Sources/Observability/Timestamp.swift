import Foundation

/// RFC 3339 timestamps in UTC with milliseconds, the form every event and log line uses.
public enum Timestamp {
    public static func rfc3339(_ date: Date) -> String {
        // Round to the millisecond first: Apple's millisecond times come back from Double as x.122999…, and
        // truncating them would print one millisecond early.
        // Clamped to years 0001...9999 first (NaN to the epoch): a date from outside must not trap the
        // conversion to Int64, and RFC 3339 has four digits of year.
        let raw = (date.timeIntervalSince1970 * 1000).rounded()
        let totalMillis = raw.isNaN ? 0 : Int64(min(max(raw, -62_135_596_800_000), 253_402_300_799_999))
        var seconds = time_t(totalMillis >= 0 ? totalMillis / 1000 : (totalMillis - 999) / 1000)
        let millis = Int(totalMillis - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Digits by hand: String(format:) goes through NSString and a locale, on every event and log line.
        var text: [UInt8] = []
        text.reserveCapacity(24)
        func append(_ value: Int, width: Int) {
            var digits = [UInt8](repeating: UInt8(ascii: "0"), count: width)
            var rest = value
            for index in stride(from: width - 1, through: 0, by: -1) {
                digits[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            text += digits
        }
        append(Int(parts.tm_year) + 1900, width: 4)
        text.append(UInt8(ascii: "-"))
        append(Int(parts.tm_mon) + 1, width: 2)
        text.append(UInt8(ascii: "-"))
        append(Int(parts.tm_mday), width: 2)
        text.append(UInt8(ascii: "T"))
        append(Int(parts.tm_hour), width: 2)
        text.append(UInt8(ascii: ":"))
        append(Int(parts.tm_min), width: 2)
        text.append(UInt8(ascii: ":"))
        append(Int(parts.tm_sec), width: 2)
        text.append(UInt8(ascii: "."))
        append(min(max(millis, 0), 999), width: 3)
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    /// What ``rfc3339(_:)`` writes (`2026-11-30T17:26:36.233Z`; from none to nine digits of fraction), read by
    /// hand: a formatter per row of the SQLite ledger cost more than the query. Nil for anything else.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 30, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"),
            bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var milliseconds = 0
        if bytes.count > 20 {
            let fraction = bytes[20..<(bytes.count - 1)]
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(fraction.count),
                let digits = number(20..<(bytes.count - 1))
            else { return nil }
            milliseconds = fraction.count >= 3 ? digits / pow10(fraction.count - 3) : digits * pow10(3 - fraction.count)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: Double(timegm(&parts)) + Double(milliseconds) / 1000)
    }

    private static func pow10(_ exponent: Int) -> Int { (0..<exponent).reduce(1) { value, _ in value * 10 } }
}
