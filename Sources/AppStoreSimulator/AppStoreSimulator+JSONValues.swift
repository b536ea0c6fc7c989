import AppleVerification
import Crypto
import Foundation
import HTTPServerKit
import Synchronization
import Vocabulary

/// The simulator's readers of JSONSerialization values, its millisecond times and its history tokens.
extension AppStoreSimulator {
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// An integer from a JSONSerialization value (not a Boolean, not a fraction).
    static func integer(_ value: Any) -> Int? {
        guard !isBoolean(value), let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        guard double.rounded() == double, abs(double) < 9e15 else { return nil }
        return Int(double)
    }

    static func number(_ value: Any) -> Double? {
        guard !isBoolean(value), let number = value as? NSNumber, number.doubleValue.isFinite else { return nil }
        return number.doubleValue
    }

    /// JSONSerialization's `true` and `false` are NSNumbers that `is Bool` cannot tell from 1 and 0 on Linux;
    /// their class can.
    static func isBoolean(_ value: Any) -> Bool {
        ObjectIdentifier(type(of: value)) == booleanClass
    }

    private static let booleanClass = ObjectIdentifier(
        type(of: (try? JSONSerialization.jsonObject(with: Data("true".utf8), options: .fragmentsAllowed)) ?? 0))

    static func makeHistoryToken(after sequence: Int, role: String) -> String {
        Base64URL.encode(Data("\(role):\(sequence)".utf8))
    }

    static func historyToken(_ token: String, role: String) -> Int? {
        guard let data = Base64URL.decode(Substring(token)), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let parts = text.split(separator: ":")
        guard parts.count == 2, parts[0] == role, let sequence = Int(parts[1]), sequence >= 0 else { return nil }
        return sequence
    }
}
