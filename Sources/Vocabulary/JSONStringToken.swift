import Foundation

/// A JSON string token's text, for the readers that walk JSON's bytes themselves (the job and answer scanner, the
/// erasure's rewrite of stored events).
public enum JSONStringToken {
    /// `token` is the string with its quotes. Its bytes when it has no escape (the usual key or value, read without a
    /// parser), else unescaped by Foundation's parser (so `\u0079` and `y` are the same key); nil when that parser
    /// refuses it (a raw control character, which the scanner never lets into a token).
    public static func text(_ token: ArraySlice<UInt8>) -> String? {
        let inner = token.dropFirst().dropLast()
        // Eight bytes at a time: a receipt's kilobytes walked through the slice's iterator cost 0.7 µs a job.
        let escaped = inner.withUnsafeBufferPointer { JSONTextScan.firstSpecial(in: $0, from: 0) < $0.count }
        if !escaped { return UTF8Text.string(inner) }
        return (try? JSONSerialization.jsonObject(with: Data(token), options: .fragmentsAllowed)) as? String
    }
}
