import Foundation
import Vocabulary

extension ConfigurationKeys {
    /// `privacy.erasure_key_file`: the studio's key of a player's erasure (docs/support-desk.md, "A player
    /// erased"): 32 random bytes, as for the desk's session key. Read by whichever command erases (the command line,
    /// the desk); nothing else needs it.
    static let privacy: [ConfigurationKey] = [
        ConfigurationKey("privacy.erasure_key_file") { value, draft in
            guard let contents = try value.fileContents() else {
                draft.configuration.erasureKey = Array(repeating: 0, count: 32)  // where the key will be
                return
            }
            guard let key = keyBytes(contents) else {
                throw value.invalid("must hold 32 random bytes as 64 hex digits or base64 (openssl rand -hex 32)")
            }
            draft.configuration.erasureKey = key
        }
    ]
}
