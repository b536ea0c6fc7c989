import Foundation
import LedgerDomain
import Testing

/// The erasure's rule in memory: which string becomes what, every other byte kept.
@Suite("A player's erasure: the rule")
struct PlayerErasureRuleTests {
    /// Player `player-1` with order `ord-7` and token `tok`; pseudonyms `kind:value`, digests `sha(value)`.
    var erasure: PlayerErasure {
        var erasure = PlayerErasure(
            userID: "player-1", pseudonym: { "P(\($0.rawValue):\($1))" }, digest: { "sha(\($0))" })
        erasure.learn(.order, "ord-7")
        erasure.learn(.token, "tok")
        erasure.learn(.job, "1")
        return erasure
    }

    @Test("identifier members become their pseudonyms; keys, numbers, other members and the layout stay byte for byte")
    func values() {
        let event =
            #"{"user_id":"player-1", "order_id" : "ord-7","quantity":1,"price":33.333,"transaction_id":"ord-7","x":"player-10"}"#
        let out = String(decoding: erasure.json(Array(event.utf8)), as: UTF8.self)
        #expect(
            out
                == #"{"user_id":"P(user:player-1)", "order_id" : "P(order:ord-7)","quantity":1,"price":33.333,"transaction_id":"ord-7","x":"player-10"}"#,
            "a transaction id equal to an order id stays a transaction id")
    }

    @Test("a token's digest is the token's pseudonym; the first kind learned for a value wins")
    func tokens() {
        var erasure = erasure
        #expect(erasure.string("sha(tok)", key: "app_account_token_sha256") == "P(token:tok)")
        erasure.learn(.job, "ord-7")
        #expect(erasure.replacements["ord-7"] == "P(order:ord-7)")
    }

    @Test("text naming an identifier as a word is erased; inside a longer word or a date it is not")
    func words() {
        #expect(erasure.string("granted to order ord-7 of player player-1", key: "x") == PlayerErasure.erasedText)
        #expect(erasure.string("player-10 and ord-77", key: "x") == "player-10 and ord-77")
        #expect(erasure.string("2026-12-01T10:11:12Z", key: "x") == "2026-12-01T10:11:12Z", "1 inside a date")
    }

    @Test("a document about someone else is not about the player, whatever its free text says")
    func others() {
        #expect(!erasure.isAbout(Array(#"{"user_id":"player-2","note":"extended 1 day, like player-1"}"#.utf8)))
        #expect(erasure.isAbout(Array(#"{"order_id":"ord-7"}"#.utf8)))
        #expect(erasure.isAbout(Array(#"{"cases":["x"],"a":{"job_id":"1"}}"#.utf8)), "a nested member")
        // Not about them, but mentioning them: what names them goes, the rest stays.
        let lookup = #"{"transaction_id":"2000","cases":["paid, granted to order ord-7 of player player-1"]}"#
        #expect(!erasure.isAbout(Array(lookup.utf8)) && erasure.mentions(Array(lookup.utf8)))
        #expect(erasure.text(lookup) == #"{"transaction_id":"2000","cases":["(erased)"]}"#)
        #expect(!erasure.mentions(Array(#"{"user_id":"player-2","note":"extended player-10"}"#.utf8)))
        #expect(!erasure.mentions(Array(#"{"transaction_id":"ord-7"}"#.utf8)), "a transaction id equal to an order id")
    }

    @Test("in the player's own records free text goes whatever it says; a decision's reason stays")
    func freeText() {
        let answer = #"{"reason":"verified","credit_reason":"my son bought it","note":"see ticket"}"#
        let event = String(
            decoding: erasure.json(Array(answer.utf8), freeText: PlayerErasure.eventFreeText), as: UTF8.self)
        #expect(event == #"{"reason":"verified","credit_reason":"(erased)","note":"see ticket"}"#)
        let support = erasure.text(answer, freeText: PlayerErasure.supportFreeText)
        #expect(support == #"{"reason":"(erased)","credit_reason":"(erased)","note":"(erased)"}"#)
    }

    @Test("hostile text fails closed: escapes, combining marks, a cut document, text that is not JSON, a long string")
    func hostile() {
        let escaped = #"{"user_id":"pl\u0061yer-1","b":"e\u0301 ord-7"}"#
        #expect(erasure.text(escaped) == #"{"user_id":"P(user:player-1)","b":"(erased)"}"#, "decoded, then compared")
        let cut = #"{"user_id":"player-1","b":"ord-7"#
        #expect(erasure.text(cut) == #"{"user_id":"P(user:player-1)","b":"(erased)""#, "what is cut short is erased")
        #expect(erasure.text(#"{"a":"no one","b":"x"#) == #"{"a":"no one","b":"x"#, "and kept when it names no one")
        #expect(erasure.text("player-1 asked") == PlayerErasure.erasedText)
        #expect(erasure.text("nobody asked") == "nobody asked")
        let long = "{\"a\":\"" + String(repeating: "x", count: 1_000_000) + " ord-7\"}"
        #expect(erasure.text(long) == #"{"a":"(erased)"}"#)
    }
}
