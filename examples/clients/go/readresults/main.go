// A grant service's side: read receipt-worker's result events and apply each once (docs/integration.md).
//
//	readresults CLIENT_PROPERTIES GROUP_ID [COUNT]
//
// Prints one JSON line per event: what to do, and the event. Stops after COUNT events when given.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	// Debian 12 packages Confluent's Go client under this path (0.11.6); with Go modules, import
	// github.com/confluentinc/confluent-kafka-go/v2/kafka: the same calls.
	"github.com/confluentinc/confluent-kafka-go/kafka"
)

const resultsTopic = "receipt-results" // the worker's topics.results

// The fields this service reads; an event has more (docs/schemas), and later releases add others.
type event struct {
	EventID              string   `json:"event_id"`
	Type                 string   `json:"type"`
	OrderID              string   `json:"order_id"`
	UserID               *string  `json:"user_id"`
	AppAccountToken      *string  `json:"app_account_token"`
	ProductID            string   `json:"product_id"`
	Quantity             int      `json:"quantity"`
	Reason               string   `json:"reason"`
	RevocationPercentage *float64 `json:"revocation_percentage"`
}

func settings(path string) kafka.ConfigMap {
	file, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer file.Close()
	config := kafka.ConfigMap{}
	for lines := bufio.NewScanner(file); lines.Scan(); {
		line := strings.TrimSpace(lines.Text())
		if key, value, found := strings.Cut(line, "="); found && !strings.HasPrefix(line, "#") {
			config[key] = value
		}
	}
	return config
}

func action(eventType string, e event) string {
	player, units := "", fmt.Sprintf("%d %s", e.Quantity, e.ProductID)
	if e.UserID != nil {
		player = *e.UserID
	} else if e.AppAccountToken != nil {
		player = "the player of token " + *e.AppAccountToken
	}
	switch eventType {
	case "receipt.granted", "receipt.unclaimed": // credit it, even for an order given up on
		return fmt.Sprintf("credit %s to %s", units, player)
	case "receipt.denied": // the order stays open; its reason says whether this proof can ever pass
		return fmt.Sprintf("deny order %s: %s", e.OrderID, e.Reason)
	case "receipt.revoked": // the share refunded IN ALL (null: all of it), even if already spent
		share := 100.0
		if e.RevocationPercentage != nil {
			share = *e.RevocationPercentage
		}
		return fmt.Sprintf("debit up to %g%% in all of %s from %s, less what this order's refunds took", share, units, player)
	case "receipt.reinstated": // what the refunds took, not the whole purchase
		return fmt.Sprintf("credit back to %s what order %s's refunds took of %s", player, e.OrderID, units)
	}
	return "apply " + eventType + " as docs/integration.md says; ignore a type you do not know"
}

func main() {
	config := settings(os.Args[1])
	config["group.id"], config["enable.auto.commit"], config["auto.offset.reset"] = os.Args[2], false, "earliest"
	count := -1
	if len(os.Args) > 3 {
		count, _ = strconv.Atoi(os.Args[3])
	}
	consumer, err := kafka.NewConsumer(&config)
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	if err := consumer.SubscribeTopics([]string{resultsTopic}, nil); err != nil {
		log.Fatal(err)
	}
	applied := map[string]bool{} // event ids: keep them with the orders, in the transaction that credits the player
	for count != 0 {
		message, err := consumer.ReadMessage(-1)
		if err != nil {
			log.Fatal(err)
		}
		headers := map[string]string{} // CloudEvents headers
		for _, header := range message.Headers {
			headers[header.Key] = string(header.Value)
		}
		var e event
		if err := json.Unmarshal(message.Value, &e); err != nil {
			log.Fatal(err)
		}
		if headers["ce_id"] != e.EventID || (e.Type != "" && e.Type != headers["ce_type"]) {
			log.Fatalf("headers %v do not match event %s", headers, e.EventID)
		}
		if !applied[e.EventID] { // the same event may come twice: apply it once
			line, _ := json.Marshal(map[string]any{"action": action(headers["ce_type"], e),
				"event": json.RawMessage(message.Value)})
			fmt.Println(string(line))
			applied[e.EventID] = true
			count--
		}
		if _, err := consumer.CommitMessage(message); err != nil { // after applying: at least once
			log.Fatal(err)
		}
	}
}
