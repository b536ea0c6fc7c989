import COpenSSL
package import Foundation

/// Owns an OpenSSL `EVP_PKEY` holding a P-256 public key. Verifies ES256 signatures, from any number of threads
/// at once (each verification has its own context).
package final class ECPublicKey: Sendable {
    private let key: OpenSSLObject
    package var pointer: OpaquePointer { key.pointer }

    package init(adopting pointer: OpaquePointer) {
        key = OpenSSLObject(adopting: pointer, free: { EVP_PKEY_free($0) })
    }

    /// Reads a PEM `PUBLIC KEY`.
    package convenience init(pem: String) throws(CryptoError) {
        let key: OpaquePointer? = pem.withCString { text in
            let bio = BIO_new_mem_buf(text, -1)
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let key else {
            ERR_clear_error()
            throw CryptoError(.key, "not a PEM public key")
        }
        self.init(adopting: key)
    }

    /// Whether `signature`, JWS-style raw r‖s (64 bytes), signs SHA-256 of `message` with this key.
    package func verifyES256(signature: some DataProtocol, message: UnsafeRawBufferPointer) -> Bool {
        let raw = [UInt8](signature)
        guard raw.count == 64, let der = ES256Signature.der(fromRaw: raw) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, SHA256Method.fetched, nil, pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = der.withUnsafeBufferPointer { derBytes in
            EVP_DigestVerify(
                context, derBytes.baseAddress, derBytes.count, message.bindMemory(to: UInt8.self).baseAddress,
                message.count)
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }
}

/// Conversions between JWS raw (r‖s) and DER ECDSA signatures.
package enum ES256Signature {
    package static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else { return nil }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            _ = i2d_ECDSA_SIG(signature, &cursor)
        }
        return der
    }

    package static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let parsed else { return nil }
        defer { ECDSA_SIG_free(parsed) }
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(ECDSA_SIG_get0_r(parsed), buffer.baseAddress, 32) == 32
                && BN_bn2binpad(ECDSA_SIG_get0_s(parsed), buffer.baseAddress! + 32, 32) == 32
        }
        return ok ? raw : nil
    }
}
