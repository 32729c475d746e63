package delayq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// request is one API call: its route as the server's OpenAPI document names it ("METHOD
// /path/{param}"), the values of the path's parameters in order, and what to send.
type request struct {
	route  string
	params []string
	query  url.Values
	// body is sent as JSON when not nil.
	body any
	// idempotent: safe to repeat, so retried on 5xx and lost connections.
	idempotent bool
	// hold is how long the server may hold the request before it answers (a long poll's
	// wait): added to the call's timeout.
	hold time.Duration
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do makes the request, retrying it as the policy allows, and decodes a 2xx answer's JSON
// into out (when out is not nil and the answer has a body). It answers the HTTP status.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return 0, fmt.Errorf("delayq: %s: encoding the body: %w", r.route, err)
		}
	}
	for attempt := 0; ; attempt++ {
		status, err := c.once(ctx, r, payload, out)
		if err == nil {
			return status, nil
		}
		if !r.idempotent || attempt >= c.retry.MaxRetries || !transient(ctx, err) {
			return status, err
		}
		timer := time.NewTimer(c.retryDelay(attempt, err))
		select {
		case <-ctx.Done():
			timer.Stop()
			return status, err
		case <-timer.C:
		}
	}
}

func (c *Client) once(ctx context.Context, r request, payload []byte, out any) (int, error) {
	u, err := c.url(r)
	if err != nil {
		return 0, err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+r.hold)
		defer cancel()
	}
	method := r.route[:strings.IndexByte(r.route, ' ')]
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, &TransportError{Request: r.route, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &TransportError{Request: r.route, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, &TransportError{Request: r.route, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if payload != nil && (resp.StatusCode == http.StatusRequestEntityTooLarge || resp.StatusCode == http.StatusRequestTimeout) {
			// The server answered before it read the whole body, and may close the
			// connection after its answer without saying so (no "Connection: close"): a
			// next request sent on it would fail with EOF. It is idle now: close it.
			c.http.CloseIdleConnections()
		}
		return resp.StatusCode, apiError(r.route, resp, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("delayq: %s: reading the answer: %w", r.route, err)
		}
	}
	return resp.StatusCode, nil
}

// url builds the request's URL. Each parameter is escaped whole, so an id holding '/'
// stays one path segment.
func (c *Client) url(r request) (string, error) {
	path := r.route[strings.IndexByte(r.route, ' ')+1:]
	var b strings.Builder
	b.WriteString(c.baseURL)
	next := 0
	for {
		open := strings.IndexByte(path, '{')
		if open < 0 {
			b.WriteString(path)
			break
		}
		end := strings.IndexByte(path, '}')
		if next >= len(r.params) {
			return "", &ArgumentError{Arg: path[open+1 : end], Problem: "missing in " + r.route}
		}
		b.WriteString(path[:open])
		b.WriteString(url.PathEscape(r.params[next]))
		next++
		path = path[end+1:]
	}
	if len(r.query) > 0 {
		b.WriteByte('?')
		b.WriteString(r.query.Encode())
	}
	return b.String(), nil
}

// apiError reads an error answer; one that is not the API's JSON keeps its text.
func apiError(route string, resp *http.Response, data []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, Request: route}
	var parsed errorBody
	if json.Unmarshal(data, &parsed) == nil && parsed.Error.Code != "" {
		e.Code = ErrorCode(parsed.Error.Code)
		e.Message = parsed.Error.Message
	} else {
		e.Code = ErrorCode("http_" + strconv.Itoa(resp.StatusCode))
		e.Message = strings.TrimSpace(string(data))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// transient tells the failures a repeat may fix: a 5xx other than those that say the write
// happened, the server is too old or lacks the encryption key, and a request that got no answer while the caller's
// context still runs (its own timeout, a broken connection).
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Status >= 500 && api.Code != ErrNotReplicated && api.Code != ErrNewerDataFormat &&
			api.Code != ErrNoEncryptionKey
	}
	var te *TransportError
	return errors.As(err, &te)
}

func (c *Client) retryDelay(attempt int, err error) time.Duration {
	step := c.retry.BaseDelay << uint(attempt)
	if step <= 0 || (c.retry.MaxDelay > 0 && step > c.retry.MaxDelay) {
		step = c.retry.MaxDelay
	}
	// Jitter spreads the retries of many clients that failed at once.
	d := step/2 + time.Duration(rand.Int63n(int64(step/2)+1))
	var api *APIError
	if errors.As(err, &api) && api.RetryAfter > d {
		d = api.RetryAfter
		if c.retry.MaxDelay > 0 && d > c.retry.MaxDelay {
			d = c.retry.MaxDelay
		}
	}
	return d
}
