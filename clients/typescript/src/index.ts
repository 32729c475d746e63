// The package's entry point: the client, typed queue handles, the worker, schedules,
// groups, events, push and webhook verification, typed errors, the duration rule, the API's
// JSON shapes, and the route map that the OpenAPI coverage test checks.

export { DelayqClient } from './client.js';
export type { ClientOptions } from './client.js';
export { Queue } from './client.js';
export { Admin } from './admin.js';
export type { Which, Webhook, Webhooks } from './admin.js';
export { Schedules } from './schedules.js';
export type { Schedule, ScheduleSpec } from './schedules.js';
export { Groups } from './groups.js';
export type { GroupInfo, GroupPage, GroupSettings } from './groups.js';
export { Events } from './events.js';
export type { EventKind, EventPage, EventQuery, FollowOptions, QueueEvent } from './events.js';
export { Worker } from './worker.js';
export type { ConsumeCalls, JobContext, Logger, WorkerEvents, WorkerHandler, WorkerOptions, WorkerSource } from './worker.js';
export { errorText, MAX_ERROR_BYTES } from './failure.js';
export { durationMs, timeValue } from './duration.js';
export { verifyPush, signPush, pushInfo, ReplayGuard } from './push.js';
export type { HeaderSource, PushInfo, VerifyOptions } from './push.js';
export { verifyWebhook, signWebhook, webhookInfo } from './webhook.js';
export type { WebhookInfo } from './webhook.js';
export { ROUTES, LEFT_OUT } from './routes.js';
export type { Route } from './routes.js';
export type { CallOptions, TransportOptions } from './http.js';
export * from './errors.js';
export type * from './types.js';
