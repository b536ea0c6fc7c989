import Vocabulary

/// Minimal JSON string quoting, for hand-built lines on hot paths (logs, metrics labels).
public enum JSONString {
    public static func quote(_ string: String) -> String {
        var out = ""
        out.reserveCapacity(string.utf8.count + 2)
        append(quoted: string, to: &out)
        return out
    }

    /// Appends the string quoted to `out`, without a string of its own in between (events are built this way).
    public static func append(quoted string: String, to out: inout String) {
        // Most strings (ids, dates, base64) need no escape: one scan, one append. The scan runs on the
        // contiguous bytes, eight at a time: a receipt is kilobytes, and the generic UTF8View walk took three
        // times as long as a byte loop (10 against 3 µs for 6 KB).
        var bytes = string
        let needsEscape = bytes.withUTF8 { JSONTextScan.firstSpecial(in: $0, from: 0) < $0.count }
        out += "\""
        guard needsEscape else {
            out += string
            out += "\""
            return
        }
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u"
                let hex = String(scalar.value, radix: 16)
                out += String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// Appends the string quoted to `out`, as UTF-8: what the ledger keeps and the broker carries is bytes, and
    /// appending to a string grew it a member at a time.
    public static func append(quoted string: String, to out: inout [UInt8]) {
        var bytes = string
        let appended: Bool = bytes.withUTF8 { utf8 in
            guard JSONTextScan.firstSpecial(in: utf8, from: 0) == utf8.count else { return false }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: utf8)
            out.append(UInt8(ascii: "\""))
            return true
        }
        if !appended { out.append(contentsOf: quote(string).utf8) }
    }
}
