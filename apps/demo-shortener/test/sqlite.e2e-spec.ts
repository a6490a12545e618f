import { describeShortenerApi } from './support/api-suite';
import { runId, tempSqlite } from './support/env';

describeShortenerApi('SQLite', async () => {
  const file = tempSqlite(runId('api'));
  return { url: file.url, cleanup: () => file.remove() };
});
