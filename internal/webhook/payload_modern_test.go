package webhook

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// The 2026-06-01 envelope as json.Marshal renders it: the reference the
// hand-written modern must equal to the byte.
type refRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

type refData struct {
	ID                string          `json:"id"`
	MerchantReference json.RawMessage `json:"merchant_reference"`
	Object            json.RawMessage `json:"object"`
}

type refEvent struct {
	ID              string     `json:"id"`
	Object          string     `json:"object"`
	Type            string     `json:"type"`
	APIVersion      string     `json:"api_version"`
	Created         int64      `json:"created"`
	Livemode        bool       `json:"livemode"`
	PendingWebhooks int        `json:"pending_webhooks"`
	Request         refRequest `json:"request"`
	Sequence        int64      `json:"sequence"`
	Data            refData    `json:"data"`
}

// refModern renders ev as Payload did through json.Marshal, its record
// read field by field (decodeObject).
func refModern(ev *xaalis.Event) ([]byte, error) {
	record := bytes.TrimSpace(ev.Data)
	if len(record) == 0 || bytes.Equal(record, []byte("null")) {
		record = []byte("{}")
	}
	fields, err := decodeObject(record)
	if err != nil {
		return nil, err
	}
	return json.Marshal(refEvent{
		ID: ev.ID, Object: "event", Type: ev.Type, APIVersion: APIVersion,
		Created: ev.CreatedAt.Unix(), Livemode: ev.Mode.Live(), PendingWebhooks: 1, Sequence: ev.Seq,
		Data: refData{ID: ev.ID, MerchantReference: merchantReference(fields.get), Object: record},
	})
}

// asRefModern fails t unless Payload's 2026-06-01 bytes are refModern's,
// or both refuse the record.
func asRefModern(t testing.TB, ev *xaalis.Event) {
	t.Helper()
	want, wantErr := refModern(ev)
	got, err := Payload(xaalis.Format20260601, ev)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("record %q: error %v, json.Marshal's way %v", ev.Data, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("record %q:\n got %s\nwant %s", ev.Data, got, want)
	}
}

func TestPayload20260601AsMarshal(t *testing.T) {
	for name, data := range map[string]string{
		"a payment's record":               "",
		"no record":                        "null",
		"empty":                            "  ",
		"an empty object":                  "{}",
		"not compact, HTML and separators": "{ \"id\" : \"x\",\n \"merchant_ref\": \"<a&b>\", \"note\": \"\u2028\u2029 é\" ,\"n\": [1, 2, {\"k\": null}] }",
		"merchant_reference first":         `{"merchant_ref":"r1","merchant_reference":"r2"}`,
		"merchant_reference empty":         `{"merchant_reference":"","merchant_ref":"r1"}`,
		"merchant_reference null":          `{"merchant_reference":null}`,
		"merchant_ref not a string":        `{"merchant_ref":12}`,
		"a repeated key, the last wins":    `{"merchant_ref":"a","merchant_ref":"b"}`,
		"a key of another case":            `{"Merchant_Ref":"a"}`,
		"escaped key":                      `{"merchant\u005fref":"a"}`,
		"an array":                         `[1]`,
		"a string":                         `"x"`,
		"invalid":                          `{"a":}`,
		"trailing data":                    `{} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			ev := testEvent(t, true, "order-<1>&")
			if name != "a payment's record" {
				ev.Data = json.RawMessage(data)
			}
			asRefModern(t, ev)
		})
	}
}

// FuzzPayload20260601 holds the 2026-06-01 payload to json.Marshal's
// envelope for any stored record.
func FuzzPayload20260601(f *testing.F) {
	f.Add(`{"merchant_ref":"a<b>","x":[1,{"y":"\u2028"}]}`, int64(3))
	f.Add(`{"merchant_reference":null,"merchant_ref":""}`, int64(0))
	f.Add(`not json`, int64(-1))
	f.Fuzz(func(t *testing.T, data string, seq int64) {
		ev := testEvent(t, seq%2 == 0, "")
		ev.Data, ev.Seq = json.RawMessage(data), seq
		asRefModern(t, ev)
	})
}
