/// A UUID of version 7 (RFC 9562, section 5.7): the Unix time in milliseconds in its first 48 bits, then 74 random
/// bits, so its text sorts by when it was made. The contract recommends such ids for a job's and an order's: the
/// ledger writes each job under both, and ids that sort by time go to its indexes' newest pages, where ids in
/// random order go to random pages of indexes as large as the ledger.
package enum TimeOrderedUUID {
    /// The id made at `unixMilliseconds` (from 1970, UTC), lowercase, with its dashes.
    package static func make(unixMilliseconds: UInt64) -> String {
        var generator = SystemRandomNumberGenerator()
        return make(unixMilliseconds: unixMilliseconds, using: &generator)
    }

    package static func make(unixMilliseconds: UInt64, using generator: inout some RandomNumberGenerator) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: unixMilliseconds >> (40 - 8 * index)) }
        let random = (generator.next() as UInt64, generator.next() as UInt64)
        for index in 6..<16 {
            let word = index < 8 ? random.0 : random.1
            bytes[index] = UInt8(truncatingIfNeeded: word >> (8 * (index % 8)))
        }
        bytes[6] = 0x70 | (bytes[6] & 0x0F)  // version 7
        bytes[8] = 0x80 | (bytes[8] & 0x3F)  // variant 10 (RFC 9562)
        return bytes.withUnsafeBytes { Hex.uuid($0) }
    }
}
