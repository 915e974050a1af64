export * from './client';
export * from './messages';
export * from './devices';
export * from './deliveries';
export * from './events';
export * from './bonus';
export * from './write-behind';
export * from './poller';
export { Prisma } from './generated/client';
