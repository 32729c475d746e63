package delayq

import (
	"net/http"
	"strings"
	"time"
)

// Client is a connection to one delayq server's HTTP API. It is safe for concurrent use;
// make one and share it.
type Client struct {
	baseURL   string
	token     string
	http      *http.Client
	timeout   time.Duration
	retry     RetryPolicy
	userAgent string
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// RetryPolicy says how the calls that are safe to repeat (reads, a send with a caller id,
// extend, settings) are retried when the server answers 5xx or cannot be reached. Other
// calls (an ack, a nack, a send without an id) are never repeated by the client: a repeat
// could act twice.
type RetryPolicy struct {
	// MaxRetries is how many times a call is tried again after its first try (0: never).
	MaxRetries int
	// BaseDelay is the pause before the first retry, doubled for each next one, with
	// jitter (each pause is 50 % to 100 % of its step).
	BaseDelay time.Duration
	// MaxDelay caps one pause (a Retry-After the server gives is capped by it too).
	MaxDelay time.Duration
}

// DefaultRetryPolicy is 3 retries from 100 ms, doubling, at most 2 s apart.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}
}

// DefaultTimeout bounds one call (a long poll gets its wait on top).
const DefaultTimeout = 10 * time.Second

// NewClient makes a client of the server at baseURL (e.g. "http://127.0.0.1:7400").
func NewClient(baseURL string, opts ...ClientOption) *Client {
	c := &Client{
		baseURL:   strings.TrimRight(baseURL, "/"),
		http:      http.DefaultClient,
		timeout:   DefaultTimeout,
		retry:     DefaultRetryPolicy(),
		userAgent: "delayq-go/" + Version,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// WithToken sends token as the bearer token of every request (a send, consume, admin or
// monitor token; its role decides what the server allows).
func WithToken(token string) ClientOption { return func(c *Client) { c.token = token } }

// WithHTTPClient makes the requests with hc (a transport of your own: proxies, TLS,
// instrumentation). Its own Timeout, if set, also bounds a long poll: leave it 0.
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each call (default DefaultTimeout; 0: only by its context). A long
// poll gets its wait on top, so a receive waiting 20 s is not cut at 10.
func WithTimeout(d time.Duration) ClientOption { return func(c *Client) { c.timeout = d } }

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) ClientOption { return func(c *Client) { c.retry = p } }

// BaseURL is the server's address as given to NewClient, without a trailing slash.
func (c *Client) BaseURL() string { return c.baseURL }
