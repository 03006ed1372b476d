import pg from 'pg';

/** A notification as PostgreSQL delivered it, with the backend that sent it. */
export interface HeardNotification {
  channel: string;
  payload: string;
  senderPid: number;
}

/**
 * A connection that LISTENs on `channels` and keeps every notification it hears: what reached
 * PostgreSQL, seen from outside twokey. node-postgres, because it says which backend sent each one.
 */
export async function listenOutside(url: string, channels: readonly string[]): Promise<{ heard: HeardNotification[]; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const heard: HeardNotification[] = [];
  client.on('notification', (message) => heard.push({ channel: message.channel, payload: message.payload ?? '', senderPid: message.processId }));
  for (const channel of channels) await client.query(`listen ${channel}`);
  return { heard, close: () => client.end() };
}
