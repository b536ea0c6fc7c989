import Foundation
import LedgerDomain
import Testing

/// The erasure's rule in memory: which string becomes what, every other byte kept.
@Suite("A player's erasure: the rule")
struct PlayerErasureRuleTests {
    let erasure = PlayerErasure(
        pseudonym: "erased-aaaaaaaaaaaaaaaaaaaaaaaa",
        replacements: [
            "player-1": "erased-aaaaaaaaaaaaaaaaaaaaaaaa", "ord-7": "erased-bbbbbbbbbbbbbbbbbbbbbbbb",
            "1": "erased-cccccccccccccccccccccccc",
        ])

    @Test("identifiers become their pseudonyms; keys, numbers, other values and the layout stay byte for byte")
    func values() {
        let event =
            #"{"user_id":"player-1", "order_id" : "ord-7","quantity":1,"price":33.333,"player-1":true,"x":"player-10"}"#
        let out = String(decoding: erasure.json(Array(event.utf8)), as: UTF8.self)
        #expect(
            out
                == #"{"user_id":"erased-aaaaaaaaaaaaaaaaaaaaaaaa", "order_id" : "erased-bbbbbbbbbbbbbbbbbbbbbbbb","quantity":1,"price":33.333,"player-1":true,"x":"player-10"}"#
        )
    }

    @Test("text naming an identifier as a word is erased; inside a longer word or a date it is not")
    func words() {
        #expect(erasure.string("granted to order ord-7 of player player-1", key: "x") == PlayerErasure.erasedText)
        #expect(erasure.string("player-10 and ord-77", key: "x") == "player-10 and ord-77")
        #expect(erasure.string("2026-12-01T10:11:12Z", key: "x") == "2026-12-01T10:11:12Z", "1 inside a date")
        #expect(erasure.string("1", key: "x") == "erased-cccccccccccccccccccccccc")
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

    @Test("hostile text: escapes, combining marks, an unterminated string, text that is not JSON, a long string")
    func hostile() {
        let escaped = #"{"a":"pl\u0061yer-1","b":"e\u0301 ord-7"}"#
        #expect(
            erasure.text(escaped)
                == #"{"a":"erased-aaaaaaaaaaaaaaaaaaaaaaaa","b":"(erased)"}"#, "decoded before it is compared")
        let cut = #"{"a":"player-1","b":"ord-7"#
        #expect(erasure.text(cut) == #"{"a":"erased-aaaaaaaaaaaaaaaaaaaaaaaa","b":"ord-7"#, "what cannot be read stays")
        #expect(erasure.text("player-1 asked") == PlayerErasure.erasedText)
        let long = "{\"a\":\"" + String(repeating: "x", count: 1_000_000) + " ord-7\"}"
        #expect(erasure.text(long) == #"{"a":"(erased)"}"#)
    }
}
