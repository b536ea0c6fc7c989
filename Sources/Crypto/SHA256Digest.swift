import COpenSSL
package import Foundation
import Vocabulary

/// SHA-256 through OpenSSL: stable ids, fingerprints, a session's id.
package enum SHA256Digest {
    /// Stops the process when OpenSSL has no SHA-256 (a configuration without its default provider): 32 zero bytes
    /// instead would make every job's fingerprint and every event's id the same.
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let hashed = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer {
                EVP_Digest(input.baseAddress, input.count, $0.baseAddress, nil, SHA256Method.fetched, nil) == 1
            }
        }
        precondition(hashed, "OpenSSL has no SHA-256: check OPENSSL_CONF and its providers")
        return digest
    }

    /// The digest of `head` followed by `tail`'s UTF-8, as if they were one run of bytes: a long tail (a receipt of
    /// kilobytes) is hashed in place instead of copied behind the head first.
    package static func hex(_ head: [UInt8], thenUTF8 tail: String) -> String {
        var tail = tail
        var digest = [UInt8](repeating: 0, count: 32)
        let hashed = head.withUnsafeBytes { head in
            tail.withUTF8 { tail in
                digest.withUnsafeMutableBufferPointer { digest in
                    guard let context = EVP_MD_CTX_new() else { return false }
                    defer { EVP_MD_CTX_free(context) }
                    return EVP_DigestInit_ex(context, SHA256Method.fetched, nil) == 1
                        && EVP_DigestUpdate(context, head.baseAddress, head.count) == 1
                        && EVP_DigestUpdate(context, tail.baseAddress, tail.count) == 1
                        && EVP_DigestFinal_ex(context, digest.baseAddress, nil) == 1
                }
            }
        }
        precondition(hashed, "OpenSSL has no SHA-256: check OPENSSL_CONF and its providers")
        return digest.withUnsafeBytes { Hex.encode($0) }
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
