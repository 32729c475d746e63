package delayq

import "time"

// RateLimit is a rate limit: deliveries per second, and how many at once after a quiet
// spell (Burst; 0 in a setting: the server's default, 1: evenly paced).
type RateLimit struct {
	// PerSecond is the most deliveries (or requests) a second.
	PerSecond int `json:"per_second"`
	// Burst is how many may go at once after a quiet spell.
	Burst int `json:"burst,omitempty"`
}

// Retention is how long, and how many per partition, final records a queue keeps.
type Retention struct {
	// KeepFor is how long each final record is kept.
	KeepFor time.Duration
	// Max is the most kept per partition, the oldest dropped first.
	Max int
}

// QueueStats is a queue's counts and settings, added up over its partitions.
type QueueStats struct {
	// Name is the queue's name.
	Name string
	// Delayed, Ready, InFlight and Dead count the messages in each state.
	Delayed, Ready, InFlight, Dead int64
	// OldestReadyLag is how long the oldest ready message has waited.
	OldestReadyLag time.Duration
	// Overdue counts the messages in flight held past their lease (their consumer died or
	// stalled).
	Overdue int64
	// OldestOverdue is how long ago the oldest overdue lease ended.
	OldestOverdue time.Duration
	// Partitions is how many partitions the queue is spread over.
	Partitions int
	// Paused: no consumer gets a message until it is resumed.
	Paused bool
	// IdempotencyWindow is how long a caller id stays reserved after its message is gone.
	IdempotencyWindow time.Duration
	// RateLimit is the queue's rate limit (nil: none).
	RateLimit *RateLimit
	// DataFormat is the format of the queue's data.
	DataFormat int
	// Groups counts the groups with messages pending or in flight.
	Groups int64
	// GroupConcurrency bounds a group's messages in flight (0: no limit).
	GroupConcurrency int
	// GroupRateLimit is each group's rate limit (nil: none).
	GroupRateLimit *RateLimit
	// DefaultTTL bounds how long after it is due a message may be delivered (0: no limit).
	DefaultTTL time.Duration
	// OnExpire is what an expired message becomes: "dead_letter" or "drop".
	OnExpire string
	// MaxDelay refuses sends due further out (0: no limit of the queue's own).
	MaxDelay time.Duration
	// Completed counts the final records kept.
	Completed int64
	// RetainCompleted is how final records are kept (nil: none kept).
	RetainCompleted *Retention
	// Events counts the events kept.
	Events int64
	// EventsMax is about how many events each partition keeps (0: the queue records none).
	EventsMax int64
}

type wireStats struct {
	Name              string     `json:"name"`
	Delayed           int64      `json:"delayed"`
	Ready             int64      `json:"ready"`
	InFlight          int64      `json:"in_flight"`
	Dead              int64      `json:"dead"`
	OldestReadyLag    msDuration `json:"oldest_ready_lag_ms"`
	Overdue           int64      `json:"overdue"`
	OldestOverdue     msDuration `json:"oldest_overdue_ms"`
	Partitions        int        `json:"partitions"`
	Paused            bool       `json:"paused"`
	IdempotencyWindow msDuration `json:"idempotency_window_ms"`
	RateLimit         *RateLimit `json:"rate_limit"`
	DataFormat        int        `json:"data_format"`
	Groups            int64      `json:"groups"`
	GroupConcurrency  *int       `json:"group_concurrency"`
	GroupRateLimit    *RateLimit `json:"group_rate_limit"`
	DefaultTTL        msDuration `json:"default_ttl_ms"`
	OnExpire          string     `json:"on_expire"`
	MaxDelay          msDuration `json:"max_delay_ms"`
	Completed         int64      `json:"completed"`
	RetainCompleted   *struct {
		KeepFor msDuration `json:"keep_for_ms"`
		Max     int        `json:"max"`
	} `json:"retain_completed"`
	Events    int64  `json:"events"`
	EventsMax *int64 `json:"events_max"`
}

func (w wireStats) public() QueueStats {
	s := QueueStats{
		Name: w.Name, Delayed: w.Delayed, Ready: w.Ready, InFlight: w.InFlight, Dead: w.Dead,
		OldestReadyLag: time.Duration(w.OldestReadyLag), Overdue: w.Overdue,
		OldestOverdue: time.Duration(w.OldestOverdue), Partitions: w.Partitions, Paused: w.Paused,
		IdempotencyWindow: time.Duration(w.IdempotencyWindow), RateLimit: w.RateLimit,
		DataFormat: w.DataFormat, Groups: w.Groups, GroupRateLimit: w.GroupRateLimit,
		DefaultTTL: time.Duration(w.DefaultTTL), OnExpire: w.OnExpire, MaxDelay: time.Duration(w.MaxDelay),
		Completed: w.Completed, Events: w.Events,
	}
	if w.GroupConcurrency != nil {
		s.GroupConcurrency = *w.GroupConcurrency
	}
	if w.RetainCompleted != nil {
		s.RetainCompleted = &Retention{KeepFor: time.Duration(w.RetainCompleted.KeepFor), Max: w.RetainCompleted.Max}
	}
	if w.EventsMax != nil {
		s.EventsMax = *w.EventsMax
	}
	return s
}

// QueueDeleted is what DeleteQueue did.
type QueueDeleted struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// Messages counts the messages deleted with it (0 unless forced).
	Messages int64 `json:"messages"`
	// Keys counts the Redis keys deleted.
	Keys int64 `json:"keys"`
	// Raced: a message sent meanwhile started the queue again.
	Raced bool `json:"raced"`
}

// DeadLetter is a message that failed for good, with its error history.
type DeadLetter struct {
	// ID is the message's id.
	ID string
	// DiedAt is when it became a dead letter.
	DiedAt time.Time
	// Attempts counts its deliveries; MaxAttempts is how many it could have.
	Attempts, MaxAttempts int
	// Priority is 0 (lowest) to 9 (highest); a requeue keeps it.
	Priority int
	// LastError is its newest error.
	LastError string
	// Errors is its last few failed attempts, oldest first.
	Errors []FailedAttempt
	// Payload is its payload.
	Payload RawPayload
}

type wireDead struct {
	wirePayload
	ID          string       `json:"id"`
	DiedAt      msTime       `json:"died_at_ms"`
	Attempts    int          `json:"attempts"`
	MaxAttempts int          `json:"max_attempts"`
	Priority    int          `json:"priority"`
	LastError   string       `json:"last_error"`
	Errors      []wireFailed `json:"errors"`
}

// DeadLetterPage is one page of a queue's dead letters, oldest death first.
type DeadLetterPage struct {
	// Total counts all the queue's dead letters.
	Total int64
	// DeadLetters are this page's.
	DeadLetters []DeadLetter
}

// PushTargetSettings is a push target to set (SetPushTarget). Zero fields take the
// server's defaults.
type PushTargetSettings struct {
	// URL is where each message is sent: http:// or https:// (required).
	URL string
	// Method is POST (default), PUT or PATCH.
	Method string
	// Headers are extra headers of each request.
	Headers map[string]string
	// Timeout bounds one request (default 10 s, at most 10 min).
	Timeout time.Duration
	// Concurrency is the most requests at once, per server (default 16).
	Concurrency int
	// SigningKeys sign the requests (16-256 characters each): the current one first, and
	// during a rotation the old one. Default: the target's keys, else a new random key.
	SigningKeys []string
	// DeadStatuses make a message a dead letter at once (default: every 4xx but 408, 429).
	DeadStatuses []int
	// FailureCallback is called once with a message and its errors when it dies.
	FailureCallback string
	// FollowRedirects follows up to 5 redirects, each checked (default false).
	FollowRedirects bool
	// RateLimit bounds the requests a second across every server.
	RateLimit *RateLimit
	// AllowMessageURLs are origins a message's own PushURL may be on.
	AllowMessageURLs []string
}

// PushTarget is a queue's push target as the server keeps it.
type PushTarget struct {
	// URL is where each message is sent.
	URL string
	// Method is POST, PUT or PATCH.
	Method string
	// Headers are the extra headers of each request.
	Headers map[string]string
	// Timeout bounds one request.
	Timeout time.Duration
	// Concurrency is the most requests at once, per server.
	Concurrency int
	// SigningKeys are the keys the requests are signed with: give them to VerifyPush.
	SigningKeys []string
	// DeadStatuses make a message a dead letter at once (nil: the server's default).
	DeadStatuses []int
	// FailureCallback is called once when a message dies ("" if none).
	FailureCallback string
	// FollowRedirects tells whether redirects are followed.
	FollowRedirects bool
	// AllowMessageURLs are the origins a message's own PushURL may be on.
	AllowMessageURLs []string
}

type wirePushTarget struct {
	URL              string            `json:"url"`
	Method           string            `json:"method"`
	Headers          map[string]string `json:"headers"`
	Timeout          msDuration        `json:"timeout_ms"`
	Concurrency      int               `json:"concurrency"`
	SigningKeys      []string          `json:"signing_keys"`
	DeadStatuses     []int             `json:"dead_statuses"`
	FailureCallback  *string           `json:"failure_callback"`
	FollowRedirects  bool              `json:"follow_redirects"`
	AllowMessageURLs []string          `json:"allow_message_urls"`
}

func (w wirePushTarget) public() *PushTarget {
	t := &PushTarget{
		URL: w.URL, Method: w.Method, Headers: w.Headers, Timeout: time.Duration(w.Timeout),
		Concurrency: w.Concurrency, SigningKeys: w.SigningKeys, DeadStatuses: w.DeadStatuses,
		FollowRedirects: w.FollowRedirects, AllowMessageURLs: w.AllowMessageURLs,
	}
	if w.FailureCallback != nil {
		t.FailureCallback = *w.FailureCallback
	}
	return t
}

// ServerInfo is the Redis (or Valkey) server a delayq server uses, as Ready answers it.
type ServerInfo struct {
	// Kind is "redis" or "valkey".
	Kind string `json:"kind"`
	// Version is its version.
	Version string `json:"version"`
}
