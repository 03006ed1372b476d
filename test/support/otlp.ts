/**
 * A local OpenTelemetry collector's front door: an OTLP/HTTP receiver on 127.0.0.1 that decodes
 * the default protocol (`http/protobuf`, `ExportTraceServiceRequest`) into plain spans.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { once } from 'node:events';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  attributes: Record<string, string | number | boolean>;
  /** The resource of the process that sent it (`service.name`, `service.version`…). */
  resource: Record<string, string | number | boolean>;
}

export interface ExportRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

type Field = { no: number; value: Uint8Array | number | bigint };

/** The fields of one protobuf message, in order (length-delimited ones as bytes, to decode by their schema). */
function fieldsOf(bytes: Uint8Array): Field[] {
  const reader = new BinaryReader(bytes);
  const fields: Field[] = [];
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    if (wireType === WireType.LengthDelimited) fields.push({ no, value: reader.bytes() });
    else if (wireType === WireType.Varint) fields.push({ no, value: Number(reader.uint64()) });
    else if (wireType === WireType.Bit64) fields.push({ no, value: BigInt(reader.fixed64()) });
    else reader.skip(wireType, no);
  }
  return fields;
}

const messages = (fields: Field[], no: number): Uint8Array[] =>
  fields.filter((f) => f.no === no && f.value instanceof Uint8Array).map((f) => f.value as Uint8Array);
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
const hex = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString('hex');

/** `KeyValue` list: `AnyValue` string (1), bool (2), int (3) or double (4, as its bits). */
function attributesOf(keyValues: Uint8Array[]): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {};
  for (const keyValue of keyValues) {
    const fields = fieldsOf(keyValue);
    const key = text(messages(fields, 1)[0] ?? new Uint8Array());
    const value = fieldsOf(messages(fields, 2)[0] ?? new Uint8Array())[0];
    if (!value) continue;
    if (value.no === 1 && value.value instanceof Uint8Array) attributes[key] = text(value.value);
    else if (value.no === 2) attributes[key] = value.value === 1;
    else if (value.no === 3) attributes[key] = Number(value.value);
  }
  return attributes;
}

/** Every span of an `ExportTraceServiceRequest` (resource_spans → scope_spans → spans). */
export function decodeTraceExport(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of messages(fieldsOf(body), 1)) {
    const fields = fieldsOf(resourceSpans);
    const resource = attributesOf(messages(fieldsOf(messages(fields, 1)[0] ?? new Uint8Array()), 1));
    for (const scopeSpans of messages(fields, 2)) {
      for (const span of messages(fieldsOf(scopeSpans), 2)) {
        const spanFields = fieldsOf(span);
        spans.push({
          traceId: hex(messages(spanFields, 1)[0]),
          spanId: hex(messages(spanFields, 2)[0]),
          parentSpanId: hex(messages(spanFields, 4)[0]),
          name: text(messages(spanFields, 5)[0] ?? new Uint8Array()),
          attributes: attributesOf(messages(spanFields, 9)),
          resource,
        });
      }
    }
  }
  return spans;
}

/** Records every export it receives and answers as a collector does (200, an empty protobuf response). */
export async function startOtlpReceiver(): Promise<{ url: string; requests: ExportRequest[]; close(): Promise<void> }> {
  const requests: ExportRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}
