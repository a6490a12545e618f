/** Types of local-cluster.js (a plain CommonJS module, so that node scripts use it unbuilt). */
export interface ClusterNodeAddress {
  host: string;
  port: number;
}

export interface LocalCluster {
  dir: string;
  bin: string;
  /** Every node (masters and replicas), as ioredis' Cluster seed nodes. */
  nodes: ClusterNodeAddress[];
  ports: number[];
  /** `127.0.0.1:p1,127.0.0.1:p2,...`: the apps' REDIS_CLUSTER_NODES. */
  readonly nodesEnv: string;
  /** The current masters and replicas (roles change on failover). */
  roles(): Promise<{ masters: number[]; replicas: { port: number; masterPort: number }[] }>;
  /** CLUSTER FAILOVER on a replica; resolves once it is master and the cluster is ok. */
  failover(replicaPort: number): Promise<void>;
  info(port: number, section: string): Promise<Record<string, string>>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 2000); removes the directory. */
  stop(graceMs?: number): Promise<void>;
}

export interface LocalSingle {
  dir: string;
  bin: string;
  port: number;
  url: string;
  info(section: string): Promise<Record<string, string>>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 2000); removes the directory. */
  stop(graceMs?: number): Promise<void>;
}

export function startLocalCluster(options?: {
  masters?: number;
  replicasPerMaster?: number;
  extraArgs?: string[];
}): Promise<LocalCluster>;
export function startSingle(options?: { extraArgs?: string[] }): Promise<LocalSingle>;
export function findRedisServer(): string | undefined;
export function freePort(): Promise<number>;
export function parseInfo(text: string): Record<string, string>;
