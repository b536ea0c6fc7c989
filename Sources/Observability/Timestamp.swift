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
}
