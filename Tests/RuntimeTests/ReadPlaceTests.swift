import Messaging
import Testing

/// `TOPIC[PARTITION]@OFFSET`, as the worker writes `parked_from` and `dlq_first_read`, read in one place.
@Suite("A record's place as text")
struct ReadPlaceTests {
    @Test("written and read back; a topic may hold brackets and @; anything else is no place")
    func roundTrip() {
        let place = ReadPlace(TopicPartition(topic: "games[eu]@x", partition: 3), offset: 1_234)
        #expect(place.description == "games[eu]@x[3]@1234")
        #expect(ReadPlace(place.description) == place)
        // Kafka's longest topic name, the largest partition and offset: still a place.
        let longest = ReadPlace(
            TopicPartition(topic: String(repeating: "t", count: 249), partition: .max), offset: .max)
        #expect(ReadPlace(longest.description) == longest)
        // A topic ending in a character that joins the next one (U+0605 before the `[`): still its own place.
        let joined = ReadPlace(TopicPartition(topic: "jobs\u{605}", partition: -2_147_483_648), offset: -3_493_451_912)
        #expect(ReadPlace(joined.description) == joined)
        for text in [
            "jobs[2]@x", "[2]@5", "jobs2@5", "jobs[two]@5", "jobs[2]5", "jobs[2]@", "jobs[99999999999]@1",
            String(repeating: "j", count: 296) + "[1]@1",
        ] {
            #expect(ReadPlace(text) == nil, "\(text) read as a place")
        }
    }
}
