@testable import AppleVerification
import Testing
import Vocabulary

/// The scan of a JSON string's plain bytes, eight at a time, against the rule a byte at a time: a quote, a
/// backslash or a control character ends a run, and nothing else does (not DEL, not UTF-8's high bytes).
@Suite("JSON strings scanned a word at a time")
struct JSONTextScanTests {
    static func naive(_ bytes: [UInt8], from start: Int) -> Int {
        var index = start
        while index < bytes.count, !(bytes[index] == 0x22 || bytes[index] == 0x5C || bytes[index] < 0x20) {
            index += 1
        }
        return index
    }

    static func scan(_ bytes: [UInt8], from start: Int) -> Int {
        bytes.withUnsafeBufferPointer { JSONTextScan.firstSpecial(in: $0, from: start) }
    }

    @Test("each special byte found at every place of a run, whatever the plain bytes around it")
    func everyPlace() {
        for filler: UInt8 in [0x41, 0x20, 0x7F, 0x80, 0xFF, 0x21, 0x5D, 0x23] {
            for length in 0..<40 {
                let plain = [UInt8](repeating: filler, count: length)
                #expect(Self.scan(plain, from: 0) == length)
                for special: UInt8 in [0x22, 0x5C, 0x00, 0x1F, 0x0A] {
                    for place in 0..<length {
                        var bytes = plain
                        bytes[place] = special
                        for start in [0, place / 2, place, min(place + 1, length)] {
                            #expect(Self.scan(bytes, from: start) == Self.naive(bytes, from: start))
                        }
                    }
                }
            }
        }
    }

    @Test("random bytes: the same answer as a byte at a time")
    func random() {
        var generator = SeededGenerator(seed: 0x5EED)
        for _ in 0..<2_000 {
            let count = Int.random(in: 0..<64, using: &generator)
            // Mostly plain bytes, some specials: runs of every length end at every kind of byte.
            let bytes = (0..<count).map { _ in
                Int.random(in: 0..<10, using: &generator) == 0
                    ? [0x22, 0x5C, 0x00, 0x1F][Int.random(in: 0..<4, using: &generator)]
                    : UInt8.random(in: 0x20...0xFF, using: &generator)
            }
            let start = Int.random(in: 0...count, using: &generator)
            #expect(Self.scan(bytes, from: start) == Self.naive(bytes, from: start))
        }
    }

    @Test("a job with a receipt of kilobytes: an escape anywhere is read, a raw control character refused")
    func scannerOnLongStrings() {
        let receipt = String(repeating: "QUJD", count: 1_500)
        for place in [0, 7, 8, 9, 4_095, 5_999] {
            var escaped = Array(receipt.utf8)
            escaped.insert(contentsOf: Array(#"\/"#.utf8), at: place)
            let job = Array(#"{"receipt":""#.utf8) + escaped + Array(#"","order_id":"o"}"#.utf8)
            let members = JSONObjectScanner.members(job)
            #expect(members?.map(\.key) == ["receipt", "order_id"])
            var raw = Array(receipt.utf8)
            raw.insert(0x09, at: place)
            #expect(JSONObjectScanner.members(Array(#"{"receipt":""#.utf8) + raw + Array(#""}"#.utf8)) == nil)
        }
    }
}

/// SplitMix64: the same bytes on every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
