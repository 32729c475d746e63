package delayq

// Routes maps each API operation this client covers, "METHOD /path" as the server's
// /openapi.json names it, to the function or method that calls it. The coverage test
// (coverage_test.go) checks it against a running server's document, and reads this
// package's source to check that each function named holds its route.
var Routes = map[string]string{
	// produce (role send)
	"POST /v1/queues/{queue}/messages":                 "Send",
	"POST /v1/queues/{queue}/batch":                    "SendBatch",
	"GET /v1/queues/{queue}/messages/{id}":             "Client.Get",
	"DELETE /v1/queues/{queue}/messages/{id}":          "Client.Cancel",
	"POST /v1/queues/{queue}/cancel":                   "Client.CancelMany",
	"POST /v1/queues/{queue}/messages/{id}/reschedule": "Client.reschedule",
	"GET /v1/queues/{queue}/messages":                  "Client.ListMessages",
	// consume (role consume)
	"POST /v1/queues/{queue}/receive": "AckAndReceive",
	"POST /v1/receive":                "ReceiveMany",
	"POST /v1/queues/{queue}/ack":     "Client.Ack",
	"POST /v1/queues/{queue}/nack":    "Client.Nack",
	"POST /v1/queues/{queue}/extend":  "Client.Extend",
	"POST /v1/queues/{queue}/release": "Client.Release",
	// admin (role admin)
	"GET /v1/queues":                  "Client.Queues",
	"GET /v1/queues/{queue}":          "Client.Stats",
	"PUT /v1/queues/{queue}":          "Client.CreateQueue",
	"PATCH /v1/queues/{queue}":        "Client.Configure",
	"DELETE /v1/queues/{queue}":       "Client.DeleteQueue",
	"POST /v1/queues/{queue}/pause":   "Client.Pause",
	"POST /v1/queues/{queue}/resume":  "Client.Resume",
	"GET /v1/queues/{queue}/dead":     "Client.DeadLetters",
	"POST /v1/queues/{queue}/requeue": "Client.RequeueDead",
	"POST /v1/queues/{queue}/purge":   "Client.PurgeDead",
	"PUT /v1/queues/{queue}/push":     "Client.SetPushTarget",
	"GET /v1/queues/{queue}/push":     "Client.PushTarget",
	"DELETE /v1/queues/{queue}/push":  "Client.DeletePushTarget",
	"GET /healthz":                    "Client.Health",
	"GET /readyz":                     "Client.Ready",
}

// LeftOut maps each API operation this client does not wrap to why. Client.Raw calls any
// of them.
var LeftOut = map[string]string{
	"GET /metrics":                                      "Prometheus text for a scraper, not for application code",
	"GET /v1/queues/{queue}/events":                     "the event feed (JSON pages or a server-sent-events stream) needs a stream reader of its own; webhook calls of those events verify with VerifyWebhook",
	"PUT /v1/queues/{queue}/webhooks":                   "event webhooks are operator configuration (delayq webhooks add, the dashboard)",
	"GET /v1/queues/{queue}/webhooks":                   "event webhooks are operator configuration (delayq webhooks list, the dashboard)",
	"DELETE /v1/queues/{queue}/webhooks":                "event webhooks are operator configuration (delayq webhooks remove, the dashboard)",
	"GET /v1/queues/{queue}/schedules":                  "recurring schedules are operator setup (delayq schedule ...), not per-request calls",
	"PUT /v1/queues/{queue}/schedules/{name}":           "recurring schedules are operator setup (delayq schedule put)",
	"GET /v1/queues/{queue}/schedules/{name}":           "recurring schedules are operator setup (delayq schedule get)",
	"PATCH /v1/queues/{queue}/schedules/{name}":         "recurring schedules are operator setup (pause or resume one with the CLI)",
	"DELETE /v1/queues/{queue}/schedules/{name}":        "recurring schedules are operator setup (delayq schedule delete)",
	"POST /v1/queues/{queue}/schedules/{name}/backfill": "an operator's repair step for a schedule, not application code",
	"GET /v1/queues/{queue}/groups":                     "per-group settings are operator tuning; sends take Group all the same",
	"GET /v1/queues/{queue}/groups/{group}":             "per-group settings are operator tuning; sends take Group all the same",
	"PATCH /v1/queues/{queue}/groups/{group}":           "per-group settings are operator tuning; SetGroupConcurrency covers the queue-wide one",
	"GET /v1/queues/{queue}/format":                     "data-format upgrades belong to a deploy (delayq format show)",
	"POST /v1/queues/{queue}/upgrade":                   "data-format upgrades belong to a deploy (delayq format upgrade)",
	"GET /v1/processes":                                 "which processes read which data format: upgrade tooling (delayq processes)",
}
