public import Foundation

/// RFC 3339 times: the one writer (UTC, milliseconds: every event, ledger row and log line) and the one reader
/// (what a job's `submitted_at`, a command's `--since`, the desk's API and an app receipt carry). Both by hand:
/// a formatter per call cost more than the query or the event around it.
public enum RFC3339 {
    /// `2026-11-30T17:26:36.233Z`. Rounded to the millisecond first: Apple's millisecond times come back from
    /// Double as x.122999…, and truncating them would print one millisecond early. Clamped to years 0001...9999
    /// (NaN to the epoch): a date from outside must not trap the conversion to Int64, and RFC 3339 has four
    /// digits of year.
    public static func format(_ date: Date) -> String {
        let totalMillis = EpochMilliseconds.of(date)
        var seconds = time_t(totalMillis >= 0 ? totalMillis / 1000 : (totalMillis - 999) / 1000)
        let millis = Int(totalMillis - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Written in place, 24 bytes: an array a field made this a few microseconds of every job.
        return String(unsafeUninitializedCapacity: 24) { text in
            var at = 0
            func put(_ value: Int, width: Int, then mark: UInt8) {
                var rest = value
                for index in stride(from: at + width - 1, through: at, by: -1) {
                    text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                text[at + width] = mark
                at += width + 1
            }
            put(Int(parts.tm_year) + 1900, width: 4, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mon) + 1, width: 2, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mday), width: 2, then: UInt8(ascii: "T"))
            put(Int(parts.tm_hour), width: 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_min), width: 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_sec), width: 2, then: UInt8(ascii: "."))
            put(min(max(millis, 0), 999), width: 3, then: UInt8(ascii: "Z"))
            return at
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS`, an optional fraction of any number of digits (kept to the millisecond, truncated),
    /// then `Z` or an offset `±HH:MM`; at most 40 bytes, the date a real one. Nil for anything else: the text is a
    /// client's (or read before a signature is checked), so each number is at most four digits and a fraction is
    /// never summed past its milliseconds.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard (20...40).contains(bytes.count) else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"), bytes[13] == UInt8(ascii: ":"),
            bytes[16] == UInt8(ascii: ":"), let year = number(0..<4), let month = number(5..<7),
            let day = number(8..<10), let hour = number(11..<13), let minute = number(14..<16),
            let second = number(17..<19), (1...12).contains(month), day >= 1, day <= days(inMonth: month, of: year),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        var index = 19
        var milliseconds = 0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                if index - start < 3 { milliseconds = milliseconds * 10 + Int(bytes[index] - UInt8(ascii: "0")) }
                index += 1
            }
            let digits = index - start
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { milliseconds *= 10 }
        }
        var offset = 0
        switch bytes.count - index {
        case 1 where bytes[index] == UInt8(ascii: "Z") || bytes[index] == UInt8(ascii: "z"):
            break
        case 6 where bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"):
            guard bytes[index + 3] == UInt8(ascii: ":"), let hours = number((index + 1)..<(index + 3)),
                let minutes = number((index + 4)..<(index + 6)), hours < 24, minutes < 60
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let utc = timegm(&parts)
        return Date(timeIntervalSince1970: Double(utc - offset) + Double(milliseconds) / 1000)
    }

    private static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
