import COpenSSL
package import Foundation
import Vocabulary

/// SHA-256 through OpenSSL: stable ids, fingerprints, a session's id.
package enum SHA256Digest {
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer {
                _ = SHA256(input.bindMemory(to: UInt8.self).baseAddress, input.count, $0.baseAddress)
            }
        }
        return digest
    }

    /// The digest in lower-case hex.
    package static func hex(_ bytes: some ContiguousBytes) -> String { Hex.encode(hash(bytes)) }
}
