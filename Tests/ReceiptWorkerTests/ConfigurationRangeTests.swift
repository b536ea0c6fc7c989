import Foundation
import Testing

@testable import ReceiptWorker

/// docs/contract.md section 7 is the configuration reference: every key with its default and, for a number, its range.
/// What the table says of a range is what start-up does: both ends accepted, one past either end refused naming the
/// key and the range, never raised or clamped in silence.
@Suite("Every documented range of a configuration key is the range the loader enforces")
struct ConfigurationRangeTests {
    /// A key and the range its row states: the first `A to B` of its meaning (`0 to 86400000: how often ...`).
    struct DocumentedRange: CustomStringConvertible {
        let key: String
        let low: Int
        let high: Int
        /// `0` is documented as "never" or "off" beside a range that starts higher.
        let zeroTurnsOff: Bool
        var description: String { "\(key): \(low) to \(high)" }
    }

    static func documentedRanges() throws -> [DocumentedRange] {
        let lines = try ContractDocumentTests.text("docs/contract.md").split(separator: "\n")
        let begin = try #require(lines.firstIndex { $0.hasPrefix("<!-- BEGIN configuration keys") })
        let end = try #require(lines[begin...].firstIndex { $0.hasPrefix("<!-- END configuration keys") })
        var ranges: [DocumentedRange] = []
        for line in lines[(begin + 1)..<end] where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, let key = cells[0].split(separator: "`").first.map(String.init),
                !key.contains("NAME"), let match = cells[2].firstMatch(of: /(\d+) to (\d+)/),
                let low = Int(match.1), let high = Int(match.2)
            else { continue }
            let zero = cells[2].contains("`0` (never)") || cells[2].contains("`0`: never")
            ranges.append(DocumentedRange(key: key, low: low, high: high, zeroTurnsOff: zero))
        }
        return ranges
    }

    static let required = ["apple.bundle_id=com.example.game"]
    /// Keys a range's ends need beside them, for the rules between keys the table states too.
    static let companions = [
        "retry.initial_backoff_ms": ["retry.max_backoff_ms=3600000"],
        "retry.max_backoff_ms": ["retry.initial_backoff_ms=1"],
    ]

    func load(_ key: String, _ value: Int) -> Result<Void, any Error> {
        Result {
            _ = try ConfigurationLoader.load(
                file: nil, overrides: Self.required + (Self.companions[key] ?? []) + ["\(key)=\(value)"],
                environment: [:])
        }
    }

    @Test("the table states ranges for the numbers it documents")
    func found() throws {
        let ranges = try Self.documentedRanges()
        #expect(ranges.count >= 25, "the pattern no longer finds the ranges: \(ranges)")
        // The chores' keys, which once raised a value below a second in silence.
        for key in ["notifications.sweep_interval_ms", "subscriptions.status_check_interval_ms"] {
            #expect(ranges.contains { $0.key == key })
        }
    }

    @Test("both ends accepted; one past either end refused, the error naming the key")
    func enforced() throws {
        for range in try Self.documentedRanges() {
            for inside in [range.low, range.high] {
                if case .failure(let error) = load(range.key, inside) {
                    Issue.record("\(range): \(inside) refused: \(error)")
                }
            }
            // Below the range (but 0 where it turns the chore off): refused, not raised.
            var outside = [range.high + 1]
            if range.low > 1 || (range.low == 1 && !range.zeroTurnsOff) { outside.append(range.low - 1) }
            for value in outside {
                switch load(range.key, value) {
                case .success: Issue.record("\(range): \(value) accepted")
                case .failure(let error): #expect("\(error)".contains(range.key), "\(range): \(error)")
                }
            }
            if range.zeroTurnsOff, case .failure(let error) = load(range.key, 0) {
                Issue.record("\(range): 0 (off) refused: \(error)")
            }
        }
    }
}
