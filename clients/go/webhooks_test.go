package delayq_test

// Webhooks against a real server (the shared one allows 127.0.0.1, --push-allow): set, read
// back, called with an event and verified with the keys the answer gave, replaced with keys
// of our own, deleted; the URLs and kinds the server refuses.

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

type webhookCall struct {
	header http.Header
	body   []byte
}

func TestWebhooksSetGetCalledDelete(t *testing.T) {
	t.Parallel() // it waits for the server to call the webhook: let it overlap
	ctx, c, q := testContext(t), client(t), queueName(t)
	calls := make(chan webhookCall, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select { // never blocks, so Close never waits for a handler
		case calls <- webhookCall{r.Header.Clone(), body}:
		default:
		}
	}))
	defer receiver.Close()

	set, err := c.SetWebhooks(ctx, q, []delayq.Webhook{{URL: receiver.URL + "/acked", Kinds: []delayq.EventKind{delayq.EventAcked}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Webhooks) != 1 || set.Webhooks[0].URL != receiver.URL+"/acked" || len(set.Webhooks[0].Kinds) != 1 ||
		set.Webhooks[0].Kinds[0] != delayq.EventAcked || len(set.SigningKeys) != 1 || set.EventsMax != 20000 {
		t.Fatalf("set answered %+v, want the one webhook, a new key, events kept", set)
	}
	// Setting webhooks turned the queue's events on.
	if stats, err := c.Stats(ctx, q); err != nil || stats.EventsMax != 20000 {
		t.Fatalf("stats %+v, %v; want events on", stats, err)
	}
	got, err := c.GetWebhooks(ctx, q)
	if err != nil || len(got.Webhooks) != 1 || got.Webhooks[0].URL != set.Webhooks[0].URL || len(got.SigningKeys) != 1 ||
		got.SigningKeys[0] != set.SigningKeys[0] {
		t.Fatalf("get = %+v, %v; want what was set", got, err)
	}

	// An ack is POSTed to the URL, signed with the key the answer gave.
	sendReceiveAck(t, c, q, "hooked")
	select {
	case call := <-calls:
		if err := delayq.VerifyWebhook(set.SigningKeys, call.header, call.body, time.Time{}, 0); err != nil {
			t.Errorf("the webhook call does not verify with the keys set: %v", err)
		}
		if call.header.Get("Delayq-Event") != "acked" || call.header.Get("Delayq-Message-Id") != "hooked" ||
			call.header.Get("Delayq-Queue") != q {
			t.Errorf("webhook call headers %v, want hooked's ack on %s", call.header, q)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not called within 30 s of the ack")
	}

	// Replaced, with keys of our own; a webhook with no kinds gets every kind.
	keys := []string{"a-webhook-key-0123456789"}
	set, err = c.SetWebhooks(ctx, q, []delayq.Webhook{{URL: receiver.URL + "/a"}, {URL: receiver.URL + "/b", Kinds: []delayq.EventKind{delayq.EventDead}}}, keys)
	if err != nil || len(set.Webhooks) != 2 || len(set.Webhooks[0].Kinds) != 0 || len(set.SigningKeys) != 1 || set.SigningKeys[0] != keys[0] {
		t.Fatalf("replaced: %+v, %v", set, err)
	}

	// Deleted: none left, and a second delete finds none.
	if err := c.DeleteWebhooks(ctx, q); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWebhooks(ctx, q); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := c.DeleteWebhooks(ctx, q); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}

	// Refused: a private address the server does not allow, and a kind that does not exist.
	_, err = c.SetWebhooks(ctx, q, []delayq.Webhook{{URL: "http://10.1.2.3/hook"}}, nil)
	if !errors.Is(err, delayq.ErrWebhookRefused) {
		t.Errorf("a private address: %v, want ErrWebhookRefused", err)
	}
	_, err = c.SetWebhooks(ctx, q, []delayq.Webhook{{URL: receiver.URL, Kinds: []delayq.EventKind{"opened"}}}, nil)
	if !errors.Is(err, delayq.ErrInvalidWebhook) {
		t.Errorf("an unknown kind: %v, want ErrInvalidWebhook", err)
	}
}
