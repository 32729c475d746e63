// The package's entry point: the client, the worker, push verification, typed errors, the
// API's JSON shapes, and the route map that the OpenAPI coverage test checks.

export { DelayqClient } from './client.js';
export type { ClientOptions } from './client.js';
export { Admin } from './admin.js';
export type { Which } from './admin.js';
export { Worker } from './worker.js';
export type { JobContext, WorkerHandler, WorkerOptions } from './worker.js';
export { verifyPush, signPush, pushInfo, ReplayGuard } from './push.js';
export type { HeaderSource, PushInfo, VerifyOptions } from './push.js';
export { ROUTES, LEFT_OUT } from './routes.js';
export type { Route } from './routes.js';
export type { CallOptions, TransportOptions } from './http.js';
export * from './errors.js';
export type * from './types.js';
