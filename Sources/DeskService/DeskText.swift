import Foundation

/// What the desk takes as text from outside (a ticket, a player id, a claim): checked before anything is asked or
/// stored, so that no hostile byte reaches Apple, the ledger, the audit or the page.
package enum DeskText {
    /// 1 to `maxBytes` bytes of UTF-8 without control characters (C0, DEL, C1), line or paragraph separators,
    /// bidirectional overrides or a run of more than 4 combining marks (a string built to smear over a page).
    package static func isPlain(_ text: String, maxBytes: Int) -> Bool {
        guard (1...maxBytes).contains(text.utf8.count) else { return false }
        var combining = 0
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator, .format, .surrogate, .privateUse, .unassigned:
                return false
            case .nonspacingMark, .enclosingMark, .spacingMark:
                combining += 1
                if combining > 4 { return false }
            default:
                combining = 0
            }
        }
        return true
    }

    /// `text` as a log line may show it: itself when plain and short, else a placeholder.
    static func shown(_ text: String, maxBytes: Int = 128) -> String {
        isPlain(text, maxBytes: maxBytes) ? text : "(\(text.utf8.count) bytes not shown)"
    }

    /// A helpdesk's ticket id: 1 to 64 of `A-Z a-z 0-9 - _ . : # /`.
    package static func isTicket(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || "-_.:#/".utf8.contains(byte)
            }
    }

    /// An Apple transaction id: 1 to 64 ASCII digits.
    static func isTransactionID(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// An Apple order id (the invoice's): 1 to 64 ASCII letters and digits.
    static func isAppleOrderID(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
            }
    }
}
