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
	// schedules, groups, events and webhooks (role admin; events any but monitor)
	"PUT /v1/queues/{queue}/schedules/{name}":           "PutSchedule",
	"GET /v1/queues/{queue}/schedules/{name}":           "Client.GetSchedule",
	"GET /v1/queues/{queue}/schedules":                  "Client.ListSchedules",
	"DELETE /v1/queues/{queue}/schedules/{name}":        "Client.DeleteSchedule",
	"PATCH /v1/queues/{queue}/schedules/{name}":         "Client.setSchedulePaused",
	"POST /v1/queues/{queue}/schedules/{name}/backfill": "Client.BackfillSchedule",
	"GET /v1/queues/{queue}/groups":                     "Client.ListGroups",
	"GET /v1/queues/{queue}/groups/{group}":             "Client.GetGroup",
	"PATCH /v1/queues/{queue}/groups/{group}":           "Client.ConfigureGroup",
	"GET /v1/queues/{queue}/events":                     "Client.Events",
	"PUT /v1/queues/{queue}/webhooks":                   "Client.SetWebhooks",
	"GET /v1/queues/{queue}/webhooks":                   "Client.GetWebhooks",
	"DELETE /v1/queues/{queue}/webhooks":                "Client.DeleteWebhooks",
}

// LeftOut maps each API operation this client does not wrap to why. Client.Raw calls any
// of them.
var LeftOut = map[string]string{
	"GET /metrics":                        "Prometheus text for a scraper, not for application code",
	"GET /v1/queues/{queue}/format":       "data-format upgrades belong to a deploy (delayq format show)",
	"POST /v1/queues/{queue}/upgrade":     "data-format upgrades belong to a deploy (delayq format upgrade)",
	"GET /v1/processes":                   "which processes read which data format: upgrade tooling (delayq processes)",
	"GET /v1/audit":                       "who did what on the server: an operator's read (delayq audit, the dashboard's audit log)",
	"POST /v1/queues/{queue}/rotate-keys": "sealing a queue's stored payloads again with a new key: an operator's step (delayq keys rotate, the dashboard)",
}
