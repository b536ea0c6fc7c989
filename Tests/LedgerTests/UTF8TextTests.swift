import Foundation
import Testing
import Vocabulary

/// The UTF-8 check every key and text value of Apple's answers and every job goes through accepts exactly what
/// the standard library's `String(validating:as:)` accepts, and reads the same string.
@Suite("UTF-8 validation without generics")
struct UTF8TextTests {
    /// Hand-picked edges of RFC 3629: each form's bounds, overlong forms, surrogates, past U+10FFFF, cut short.
    static let edges: [[UInt8]] = [
        [], [0x00], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF], [0xC2],
        [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80],
        [0xED, 0xBF, 0xBF], [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xE1, 0x80], [0xF0, 0x80, 0x80, 0x80],
        [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80],
        [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xF0, 0x90, 0x80], Array("coins.1000 ✓ 🎮 e\u{301}".utf8),
        Array("{\"user_id\":\"p\"}".utf8) + [0xFE],
    ]

    @Test("a prefix by bytes is at most that many, cut where a scalar begins, whatever the text")
    func prefixByBytes() {
        #expect(UTF8Text.prefix("coins", bytes: 64) == "coins")
        #expect(UTF8Text.prefix("ab€", bytes: 4) == "ab")  // € is 3 bytes: not cut inside it
        #expect(UTF8Text.prefix("ab€", bytes: 5) == "ab€")
        #expect(UTF8Text.prefix("🎮x", bytes: 3) == "")
        #expect(UTF8Text.prefix("x", bytes: 0) == "")
        // One character of 10,000 combining marks: a prefix of 64 characters would be all 20,001 bytes of it.
        let marks = "e" + String(repeating: "\u{301}", count: 10_000)
        let cut = UTF8Text.prefix(marks, bytes: 64)
        #expect(cut.utf8.count == 63 && cut.unicodeScalars.count == 32)
        #expect(UTF8Text.isValid(Array(cut.utf8)))
    }

    @Test("the edges of each form are judged as the standard library judges them")
    func edges() {
        for bytes in Self.edges {
            #expect(UTF8Text.string(bytes) == String(validating: bytes, as: UTF8.self), "bytes \(bytes)")
            #expect(UTF8Text.isValid(bytes) == (String(validating: bytes, as: UTF8.self) != nil), "bytes \(bytes)")
        }
    }

    @Test("random bytes, mostly near UTF-8's lead and continuation bytes, are judged the same")
    func random() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [
            0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF,
        ]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...8, using: &generator)
            let bytes = (0..<count).map { _ in
                Bool.random(using: &generator)
                    ? alphabet.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            }
            #expect(UTF8Text.string(bytes) == String(validating: bytes, as: UTF8.self), "bytes \(bytes)")
        }
    }

    @Test("runs of ASCII, read eight bytes at a time, then each edge, at every offset, are judged the same")
    func asciiRuns() {
        for run in 0...24 {
            for edge in Self.edges {
                for bytes in [
                    Array(repeating: UInt8(ascii: "A"), count: run) + edge, edge + Array(repeating: 0x7A, count: run),
                ] {
                    #expect(UTF8Text.string(bytes) == String(validating: bytes, as: UTF8.self), "bytes \(bytes)")
                }
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            var bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                UInt8.random(in: 0x20...0x7E, using: &generator)
            }
            if !bytes.isEmpty {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
                    in: 0x80...0xFF, using: &generator)
            }
            #expect(UTF8Text.string(bytes) == String(validating: bytes, as: UTF8.self), "bytes \(bytes)")
        }
    }

    @Test("eight bytes at a time never read past the text: text that ends where memory ends is read whole")
    func neverPastTheEnd() throws {
        // The text's last byte is the last readable one: a page that cannot be read follows it, and a load past the
        // text's end would stop the test process.
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let region = try #require(
            mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                .flatMap { $0 == UnsafeMutableRawPointer(bitPattern: -1) ? nil : $0 })
        defer { munmap(region, 2 * page) }
        #expect(mprotect(region + page, page, PROT_NONE) == 0)
        let end = region.assumingMemoryBound(to: UInt8.self) + page
        for length in 0...24 {
            let text = UnsafeMutableBufferPointer(start: end - length, count: length)
            text.initialize(repeating: UInt8(ascii: "a"))
            #expect(UTF8Text.isValid(UnsafeBufferPointer(text)), "\(length) bytes")
            if length > 0 { text[length - 1] = 0xC3 }  // cut short: a lead byte at the very end
            #expect(UTF8Text.isValid(UnsafeBufferPointer(text)) == (length == 0), "\(length) bytes")
        }
    }

    @Test("a slice is read from its own bounds")
    func slice() {
        let bytes: [UInt8] = [0xFF] + Array("é".utf8) + [0xFF]
        #expect(UTF8Text.string(bytes[1..<3]) == "é")
        #expect(UTF8Text.string(bytes[0..<3]) == nil)
    }
}
