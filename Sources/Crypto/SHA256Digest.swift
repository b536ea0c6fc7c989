import COpenSSL
package import Foundation
import Vocabulary

/// SHA-256 through OpenSSL: stable ids, fingerprints, a session's id.
package enum SHA256Digest {
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer {
                _ = EVP_Digest(input.baseAddress, input.count, $0.baseAddress, nil, SHA256Method.fetched, nil)
            }
        }
        return digest
    }

    /// The digest of a string's UTF-8, read in place.
    package static func hash(utf8 text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// The digest in lower-case hex.
    package static func hex(_ bytes: some ContiguousBytes) -> String {
        hash(bytes).withUnsafeBytes { Hex.encode($0) }
    }
}
