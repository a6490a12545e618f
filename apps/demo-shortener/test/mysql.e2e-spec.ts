import { describeShortenerApi } from './support/api-suite';
import { MYSQL_URL, requireMysql } from './support/env';

describeShortenerApi('MySQL', async () => {
  await requireMysql();
  return { url: MYSQL_URL };
});
