import Synchronization
import Vocabulary

/// A trace's 16-byte id as two words (big-endian: `high` is the first 8 bytes on the wire and in hex).
public struct TraceID: Sendable, Hashable {
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// 32 lower-case hex digits.
    public var hex: String { Hex.encode(bytes) }

    /// The 16 bytes, first byte first.
    public var bytes: [UInt8] { IDWords.bytes(high) + IDWords.bytes(low) }
}

/// A span's 8-byte id as one word (big-endian on the wire and in hex).
public struct SpanID: Sendable, Hashable {
    public let value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// 16 lower-case hex digits.
    public var hex: String { Hex.encode(bytes) }

    /// The 8 bytes, first byte first.
    public var bytes: [UInt8] { IDWords.bytes(value) }
}

/// Random trace and span ids, drawn a word at a time from xoshiro256** (seeded once from the system's generator):
/// W3C Trace Context asks ids to be random, not secret, and a system call per id costs more than the span. Never
/// all zeros (an invalid id).
public enum IDWords {
    private static let generator = Mutex(Xoshiro256StarStar(seed: SystemRandomNumberGenerator()))

    public static func traceID() -> TraceID {
        let (high, low) = generator.withLock { ($0.next(), $0.next()) }
        return TraceID(high: high, low: high == 0 && low == 0 ? 1 : low)
    }

    public static func spanID() -> SpanID {
        let value = generator.withLock { $0.next() }
        return SpanID(value == 0 ? 1 : value)
    }

    /// A number in [0, 1), for a sampling decision.
    public static func unit() -> Double {
        Double(generator.withLock { $0.next() } >> 11) * 0x1.0p-53
    }

    static func bytes(_ word: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * $0)) }
    }

    /// A big-endian word of 8 bytes.
    static func word(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// xoshiro256** (Blackman and Vigna): fast, 256 bits of state, good statistical quality; not for secrets.
struct Xoshiro256StarStar {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init(seed: some RandomNumberGenerator) {
        var seed = seed
        state = (seed.next(), seed.next(), seed.next(), seed.next())
        if state == (0, 0, 0, 0) { state.0 = 1 }
    }

    mutating func next() -> UInt64 {
        let result = (state.1 &* 5).rotatedLeft(7) &* 9
        let shifted = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= shifted
        state.3 = state.3.rotatedLeft(45)
        return result
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 { self << count | self >> (64 - count) }
}
