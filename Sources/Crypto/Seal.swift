import COpenSSL
import Foundation

/// Seals what the console keeps in the browser (its session, a sign-in's state) with AES-256-GCM under the
/// desk's session key: a browser can neither read nor change it, and a cookie sealed for one purpose (its name,
/// the associated data) does not open as another.
package struct Seal: Sendable {
    private let key: [UInt8]

    /// `key`: 32 bytes (`desk.session_key_file`).
    package init?(key: [UInt8]) {
        guard key.count == 32 else { return nil }
        self.key = key
    }

    /// base64url(nonce ‖ ciphertext ‖ tag).
    package func seal(bytes plaintext: [UInt8], purpose: String) -> String? {
        let nonce = Random.bytes(12)
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: 16)
        var length: Int32 = 0
        let aad = Array(purpose.utf8)
        let ok =
            EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, nil) == 1
            && EVP_EncryptInit_ex(context, nil, nil, key, nonce) == 1
            && EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1
            && EVP_EncryptUpdate(context, &output, &length, plaintext, Int32(plaintext.count)) == 1
        guard ok else {
            ERR_clear_error()
            return nil
        }
        let written = Int(length)
        var final: Int32 = 0
        let finished = output.withUnsafeMutableBufferPointer { buffer in
            EVP_EncryptFinal_ex(context, buffer.baseAddress! + written, &final) == 1
        }
        guard finished, EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else {
            ERR_clear_error()
            return nil
        }
        return Base64URL.encode(nonce + output.prefix(written + Int(final)) + tag)
    }

    /// The plaintext, or nil for anything not sealed by this key for this purpose.
    package func open(bytes sealed: String, purpose: String) -> [UInt8]? {
        guard sealed.utf8.count <= 8_192, let bytes = Base64URL.decodeBytes(Substring(sealed)), bytes.count >= 28
        else { return nil }
        let nonce = Array(bytes.prefix(12))
        var tag = Array(bytes.suffix(16))
        let ciphertext = Array(bytes.dropFirst(12).dropLast(16))
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        let aad = Array(purpose.utf8)
        let ok =
            EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, nil, nil) == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, nil) == 1
            && EVP_DecryptInit_ex(context, nil, nil, key, nonce) == 1
            && EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1
            && EVP_DecryptUpdate(context, &output, &length, ciphertext, Int32(ciphertext.count)) == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1
        guard ok else {
            ERR_clear_error()
            return nil
        }
        let written = Int(length)
        var final: Int32 = 0
        let verified = output.withUnsafeMutableBufferPointer { buffer in
            EVP_DecryptFinal_ex(context, buffer.baseAddress! + written, &final) == 1
        }
        guard verified else {
            ERR_clear_error()
            return nil
        }
        return Array(output.prefix(written + Int(final)))
    }
}
