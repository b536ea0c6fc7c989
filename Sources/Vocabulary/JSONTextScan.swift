/// Where a run of plain bytes inside a JSON string ends, found eight bytes at a time: receipts and signed
/// payloads are strings of kilobytes, read at every job by the scanner that checks a job's grammar and by the
/// quoting that writes it into Apple's request, and a loop a byte at a time was a few microseconds of each job.
public enum JSONTextScan {
    /// The index of the first byte at or after `start` that is a quote, a backslash or a control character
    /// (below 0x20); `buffer.count` when there is none.
    public static func firstSpecial(in buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = buffer.baseAddress, start < buffer.count else { return buffer.count }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var offset = max(0, start)
        while offset + 8 <= buffer.count {
            let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            // A byte's high bit set where it is zero after the XOR (a quote, a backslash) or below 0x20. A false
            // mark can only follow a true one (a borrow carries upwards), so the lowest mark is exact.
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let marks =
                (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word))
                & highs
            if marks != 0 { return offset + marks.trailingZeroBitCount / 8 }
            offset += 8
        }
        while offset < buffer.count {
            let byte = buffer[offset]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return offset }
            offset += 1
        }
        return offset
    }
}
