import Messaging

extension FuzzChecks {
    /// A `parked_from` or `dlq_first_read` header, from the worker or anyone who writes to its topics, read by the
    /// one reader of a record's place: accepted exactly when the grammar (checked here the long way, on the bytes)
    /// says so, and what it reads is written back as a place that reads the same.
    @Sendable public static func readPlace(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let place = ReadPlace(text)
        if (place != nil) != PlaceGrammar.isValid(Array(text.utf8)) {
            return place == nil ? "a valid place refused" : "an invalid place accepted"
        }
        if let place, ReadPlace(place.description) != place { return "a place written back does not read the same" }
        return nil
    }
}

/// `TOPIC[PARTITION]@OFFSET` written the long way: at most 300 bytes; the last `@` starts the offset (an Int64, as
/// Swift reads one: an optional sign, then digits); before it `]`, and the last `[` before that starts the partition
/// (an Int32); the topic before it is not empty and may hold `[`, `]` and `@`.
enum PlaceGrammar {
    static func isValid(_ bytes: [UInt8]) -> Bool {
        guard bytes.count <= 300, let at = bytes.lastIndex(of: UInt8(ascii: "@")), at >= 1,
            bytes[at - 1] == UInt8(ascii: "]"), let bracket = bytes[..<(at - 1)].lastIndex(of: UInt8(ascii: "[")),
            bracket > 0
        else { return false }
        return fits(bytes[(bracket + 1)..<(at - 1)], in: Int64(Int32.min)...Int64(Int32.max))
            && fits(bytes[(at + 1)...], in: Int64.min...Int64.max)
    }

    /// A sign at most, then at least one digit, and a value within `range` (counted without overflowing).
    private static func fits(_ number: ArraySlice<UInt8>, in range: ClosedRange<Int64>) -> Bool {
        var digits = number[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative || digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return false
        }
        var value: Int64 = 0
        for digit in digits {
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let next =
                negative
                ? times.subtractingReportingOverflow(Int64(digit - 48))
                : times.addingReportingOverflow(Int64(digit - 48))
            guard !overflowTimes, !next.overflow else { return false }
            value = next.partialValue
        }
        return range.contains(value)
    }
}
