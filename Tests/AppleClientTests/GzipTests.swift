import HTTPClient
import Testing

/// gzip as request bodies use it: what is compressed comes back whole; what is not gzip, or cut short, or grows past
/// its limit, comes back as nothing.
@Suite struct GzipTests {
    @Test("compressed and back: empty, small, a megabyte of spans' bytes")
    func roundTrip() throws {
        let spanLike = (0..<1 << 20).map { UInt8(truncatingIfNeeded: $0 % 251 ^ $0 >> 9) }
        for original in [[], Array("receipt-worker".utf8), spanLike] {
            let compressed = try #require(Gzip.compress(original))
            #expect(compressed.prefix(2) == [0x1F, 0x8B], "a gzip header")
            #expect(Gzip.decompress(compressed) == original)
        }
        let repetitive = [UInt8](repeating: 7, count: 1 << 20)
        #expect(try #require(Gzip.compress(repetitive)).count < 10_000)
    }

    @Test("not gzip, cut short, or past the limit: nothing")
    func hostile() throws {
        let compressed = try #require(Gzip.compress([UInt8](repeating: 0, count: 1 << 20)))
        #expect(Gzip.decompress(Array("not gzip".utf8)) == nil)
        #expect(Gzip.decompress(Array(compressed.dropLast(12))) == nil)
        #expect(Gzip.decompress(compressed, limit: 1 << 19) == nil, "a bomb stops at its limit")
        #expect(Gzip.decompress([]) == nil)
    }
}
