import COpenSSL
package import Foundation

/// HMAC-SHA-256 through OpenSSL: a keyed pseudonym that only the key's holder can make again.
package enum HMACSHA256 {
    /// Nil when OpenSSL does not answer a 32-byte MAC.
    package static func mac(key: [UInt8], _ message: some ContiguousBytes) -> [UInt8]? {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let made = key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { input in
                digest.withUnsafeMutableBufferPointer {
                    HMAC(
                        SHA256Method.fetched, keyBytes.baseAddress, Int32(keyBytes.count),
                        input.bindMemory(to: UInt8.self).baseAddress, input.count, $0.baseAddress, &length) != nil
                }
            }
        }
        return made && length == 32 ? digest : nil
    }
}
