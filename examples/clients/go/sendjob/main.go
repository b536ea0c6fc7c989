// An order service's side: send a purchase's proof to receipt-worker as a job (docs/contract.md, section 2).
//
//	sendjob CLIENT_PROPERTIES ORDER_ID USER_ID PRODUCT_ID SIGNED_TRANSACTION
//
// CLIENT_PROPERTIES holds the Kafka client's settings, one KEY=VALUE a line. Prints the job's job_id once the
// broker has it.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	// Debian 12 packages Confluent's Go client under this path (0.11.6); with Go modules, import
	// github.com/confluentinc/confluent-kafka-go/v2/kafka: the same calls.
	"github.com/confluentinc/confluent-kafka-go/kafka"
)

const jobsTopic = "receipt-jobs" // the worker's topics.jobs

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

// newJobID is a UUID of version 7 (RFC 9562): the time in milliseconds first, so ids sort by when they were
// made, which keeps a job nearly as cheap for the worker's ledger when it holds millions of grants as when empty.
func newJobID() string {
	b := make([]byte, 16)
	rand.Read(b[6:])
	milliseconds := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(milliseconds >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0F // version 7
	b[8] = 0x80 | b[8]&0x3F // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func main() {
	config := settings(os.Args[1])
	config["acks"], config["enable.idempotence"] = "all", true
	producer, err := kafka.NewProducer(&config)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	orderID, jobID, topic := os.Args[2], newJobID(), jobsTopic
	// A new job_id per submission; resending the same job (same id, same content) after a timeout is safe.
	job, _ := json.Marshal(map[string]string{"job_id": jobID, "order_id": orderID, "user_id": os.Args[3],
		"product_id": os.Args[4], "signed_transaction": os.Args[5]})
	delivered := make(chan kafka.Event, 1)
	err = producer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic,
		Partition: kafka.PartitionAny}, Key: []byte(orderID), Value: job}, delivered) // keyed by order
	if err != nil {
		log.Fatal(err)
	}
	// Wait for the broker's acknowledgement before telling the player "pending".
	if report := (<-delivered).(*kafka.Message); report.TopicPartition.Error != nil {
		log.Fatalf("the job for order %s was not sent: %v", orderID, report.TopicPartition.Error)
	}
	fmt.Println(jobID)
}
